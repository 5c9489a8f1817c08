/**
 * BENCH — the Powertools for AWS Lambda (TypeScript) kit, in its documented SQS pattern:
 * `makeIdempotent` over the record handler, run by `BatchProcessor` through `processPartialResponse`
 * (docs: "Idempotency → Batch integration"), with `registerLambdaContext` so in-progress records
 * expire with the invocation. The idempotency key is the envelope's `meta.id`
 * (`powertools_json(body).meta.id`) — the key our kit uses — so both dedupe the same thing.
 *
 * Also here: `MemoryPersistenceLayer`, an in-memory `BasePersistenceLayer` (Powertools ships none)
 * with the DynamoDB layer's rules, so Powertools' own per-message cost can be measured without a
 * network, next to our `InMemoryStore`.
 *
 * What this is *not*: a recommendation to run Powertools in memory; a bench fixture.
 */
import { BatchProcessor, EventType, processPartialResponse } from "@aws-lambda-powertools/batch";
import {
  IdempotencyConfig,
  IdempotencyItemAlreadyExistsError,
  IdempotencyItemNotFoundError,
  IdempotencyRecordStatus,
  makeIdempotent,
} from "@aws-lambda-powertools/idempotency";
import { BasePersistenceLayer, type IdempotencyRecord } from "@aws-lambda-powertools/idempotency/persistence";
import type { Context, SQSRecord } from "aws-lambda";
import { Effect, type Kit, type RequestCounter } from "./kit.js";

/** The JMESPath of the BabelQueue id inside an SQS record. */
export const ENVELOPE_ID_PATH = "powertools_json(body).meta.id";

function envelopeId(record: SQSRecord): string {
  return (JSON.parse(record.body) as { meta?: { id?: string } }).meta?.id ?? "";
}

export function powertoolsKit(
  name: string,
  description: string,
  persistenceStore: BasePersistenceLayer,
  requests: RequestCounter,
): Kit {
  const effect = new Effect();
  const processor = new BatchProcessor(EventType.SQS);
  const config = new IdempotencyConfig({ eventKeyJmesPath: ENVELOPE_ID_PATH });
  const recordHandler = async (record: SQSRecord, _context: Context): Promise<void> => {
    await effect.run(envelopeId(record));
  };
  const processIdempotently = makeIdempotent(recordHandler, { persistenceStore, config });
  return {
    name,
    description,
    effect,
    requests,
    handler: async (event, context) => {
      config.registerLambdaContext(context);
      return processPartialResponse(event, processIdempotently, processor, { context });
    },
  };
}

/** Powertools' batch utility alone (no idempotency): its share of the per-message cost. */
export function powertoolsBatchOnlyKit(): Kit {
  const effect = new Effect();
  const processor = new BatchProcessor(EventType.SQS);
  const recordHandler = async (record: SQSRecord): Promise<void> => {
    await effect.run(envelopeId(record));
  };
  return {
    name: "Powertools batch only",
    description: "BatchProcessor + processPartialResponse, no idempotency",
    effect,
    requests: { count: 0, reset: () => undefined },
    handler: async (event, context) => processPartialResponse(event, recordHandler, processor, { context }),
  };
}

/** An in-memory persistence layer with the same conditions as `DynamoDBPersistenceLayer`. */
export class MemoryPersistenceLayer extends BasePersistenceLayer {
  readonly #records = new Map<string, IdempotencyRecord>();

  protected async _putRecord(record: IdempotencyRecord): Promise<void> {
    const existing = this.#records.get(record.idempotencyKey);
    if (existing !== undefined && !existing.isExpired()) {
      const orphaned =
        existing.getStatus() === IdempotencyRecordStatus.INPROGRESS &&
        existing.inProgressExpiryTimestamp !== undefined &&
        existing.inProgressExpiryTimestamp < Date.now();
      if (!orphaned) {
        throw new IdempotencyItemAlreadyExistsError(`record exists for ${record.idempotencyKey}`, existing);
      }
    }
    this.#records.set(record.idempotencyKey, record);
  }

  protected async _getRecord(idempotencyKey: string): Promise<IdempotencyRecord> {
    const record = this.#records.get(idempotencyKey);
    if (record === undefined) throw new IdempotencyItemNotFoundError();
    return record;
  }

  protected async _updateRecord(record: IdempotencyRecord): Promise<void> {
    this.#records.set(record.idempotencyKey, record);
  }

  protected async _deleteRecord(record: IdempotencyRecord): Promise<void> {
    this.#records.delete(record.idempotencyKey);
  }
}
