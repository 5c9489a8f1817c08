/**
 * The cases of a transport's `schema_version_gate` block (BabelQueue's manifest-next.json), run the
 * same way against every Lambda handler: one test per case, the block's fixture under a fresh id,
 * delivered alone with the case's property value (or none). "decode": the handler ran once and
 * nothing failed; "reject": it never ran, exactly that record failed, and the log says invalid.
 *
 * What this is *not*: the transport. Each handler's test builds its record, its handler (with the
 * probe's `handle` and `logger`) and the failure that names its record.
 */
import { expect, it } from "vitest";
import { type SchemaGateBlock, type SchemaGateCase, fixtureText } from "./conformance-data.js";

/** What a gate test's handler is given, and what it saw: runs of `handle`, warn / error lines. */
export interface GateProbe {
  readonly runs: number;
  readonly logs: readonly string[];
  readonly handle: () => void;
  readonly logger: { info(): void; warn(message: string): void; error(message: string): void };
}

function gateProbe(): GateProbe {
  const logs: string[] = [];
  const probe = {
    runs: 0,
    logs,
    handle: () => void (probe.runs += 1),
    logger: { info: () => undefined, warn: (message: string) => void logs.push(message), error: (message: string) => void logs.push(message) },
  };
  return probe;
}

/** The block's fixture, as the wire carries it, with `meta.id` = `id`. */
export function gateBody(gate: SchemaGateBlock, id: string): string {
  return fixtureText(gate.fixture).replace(/"id":\s*"[^"]*"/, `"id": "${id}"`);
}

/**
 * One test per case: `deliver` sends the case's record through a handler made with the probe and
 * answers the batch's failures and the one that would name that record.
 */
export function testSchemaGateCases(
  gate: SchemaGateBlock,
  deliver: (testCase: SchemaGateCase, index: number, probe: GateProbe) => Promise<{ failures: unknown[]; rejected: unknown }>,
): void {
  gate.cases.forEach((testCase, index) => {
    const label = testCase.absent === true ? "absent" : JSON.stringify(testCase.value);
    it(`${label} → ${testCase.expect}`, async () => {
      const probe = gateProbe();
      const { failures, rejected } = await deliver(testCase, index, probe);
      if (testCase.expect === "decode") {
        expect(probe.runs).toBe(1);
        expect(failures).toEqual([]);
      } else {
        expect(probe.runs).toBe(0);
        expect(failures).toEqual([rejected]);
        expect(probe.logs.some((line) => line.startsWith("invalid"))).toBe(true);
      }
    });
  });
}
