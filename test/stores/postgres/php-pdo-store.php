<?php
// BabelQueue's PHP SDK's PdoStore statements, run by real PHP through PDO (pdo_pgsql) — for the
// cross-writer tests in layouts.test.ts. The statements, their order, the integrity-violation
// check ('23' SQLSTATE class) and the clock (PHP's time()) follow the research notes on
// BabelQueue/php-sdk src/Idempotency/PdoStore.php (commit 93a8c184); the code is written here.
//
// usage: php php-pdo-store.php <host> <port> <table> <op> <id> [ttlSeconds]
//   op: claim | seen | remember | release | forget | dispatch (ClaimingDispatch: seen → claim → remember)
// prints one JSON value: true/false for claim and seen, "ran"/"skipped"/"parked" for dispatch, null otherwise.

[$script, $host, $port, $table, $op, $id] = array_slice($argv, 0, 6);
$ttlArg = $argv[6] ?? '3600';
if (!preg_match('/^[A-Za-z0-9_]+$/', $table)) { fwrite(STDERR, "bad table\n"); exit(2); }
$pdo = new PDO("pgsql:host=$host;port=$port;dbname=postgres", 'postgres', null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);

function claim(PDO $pdo, string $t, string $id, int $ttlSeconds): bool {
    $ttl = $ttlSeconds > 0 ? $ttlSeconds : 3600;
    $now = time();
    $expiresAt = $now + $ttl;
    try {
        $pdo->prepare("INSERT INTO $t (message_id, state, expires_at) VALUES (:id, :state, :exp)")
            ->execute(['id' => $id, 'state' => 'claimed', 'exp' => $expiresAt]);
        return true;
    } catch (PDOException $e) {
        if (!str_starts_with((string) $e->getCode(), '23')) throw $e;
    }
    $steal = $pdo->prepare("UPDATE $t SET expires_at = :exp WHERE message_id = :id AND state = :claimed AND expires_at IS NOT NULL AND expires_at < :now");
    $steal->execute(['exp' => $expiresAt, 'id' => $id, 'claimed' => 'claimed', 'now' => $now]);
    return $steal->rowCount() === 1;
}

function seen(PDO $pdo, string $t, string $id): bool {
    $q = $pdo->prepare("SELECT state FROM $t WHERE message_id = :id");
    $q->execute(['id' => $id]);
    return $q->fetchColumn() === 'seen';
}

function remember(PDO $pdo, string $t, string $id): void {
    $u = $pdo->prepare("UPDATE $t SET state = :seen, expires_at = NULL WHERE message_id = :id");
    $u->execute(['seen' => 'seen', 'id' => $id]);
    if ($u->rowCount() === 1) return;
    try {
        $pdo->prepare("INSERT INTO $t (message_id, state, expires_at) VALUES (:id, :seen, NULL)")->execute(['id' => $id, 'seen' => 'seen']);
    } catch (PDOException $e) {
        if (!str_starts_with((string) $e->getCode(), '23')) throw $e;
    }
}

switch ($op) {
    case 'claim': echo json_encode(claim($pdo, $table, $id, (int) $ttlArg)); break;
    case 'seen': echo json_encode(seen($pdo, $table, $id)); break;
    case 'remember': remember($pdo, $table, $id); echo 'null'; break;
    case 'release': $pdo->prepare("DELETE FROM $table WHERE message_id = :id AND state = :claimed")->execute(['id' => $id, 'claimed' => 'claimed']); echo 'null'; break;
    case 'forget': $pdo->prepare("DELETE FROM $table WHERE message_id = :id")->execute(['id' => $id]); echo 'null'; break;
    case 'dispatch':
        if (seen($pdo, $table, $id)) { echo json_encode('skipped'); break; }
        if (!claim($pdo, $table, $id, (int) $ttlArg)) { echo json_encode(seen($pdo, $table, $id) ? 'skipped' : 'parked'); break; }
        remember($pdo, $table, $id);
        echo json_encode('ran');
        break;
    default: fwrite(STDERR, "unknown op\n"); exit(2);
}
