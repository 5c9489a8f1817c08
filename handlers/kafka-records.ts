/**
 * Reading an Amazon MSK / self-managed Kafka event as Lambda delivers it, record by record, for
 * `kafkaHandler` — defensively: nothing in an event can make this throw.
 *
 * The event (https://docs.aws.amazon.com/lambda/latest/dg/with-msk.html,
 * https://docs.aws.amazon.com/lambda/latest/dg/with-kafka.html; `@types/aws-lambda` MSKEvent,
 * SelfManagedKafkaEvent): `eventSource` "aws:kafka" (MSK) or "SelfManagedKafka"; `records` keyed by
 * "<topic>-<partition>", each an array of records with `topic`, `partition`, `offset`, `timestamp`,
 * `key` and `value` in base64, and `headers` as an array of single-key objects whose value is the
 * header's bytes as an array of numbers (signed bytes in some runtimes' types: -128..255 accepted,
 * each taken modulo 256).
 *
 * Per record:
 * - identity: "<topic>-<partition>" (from the record's own topic and partition, else the key it
 *   sits under) and its offset (a safe integer >= 0; a digit string is accepted);
 * - the value, base64-decoded, is the body (bytes). No value (a tombstone), a value that is not
 *   strict base64, or headers that are not byte arrays make the record `rejected` (invalid: the
 *   retry / on-failure-destination path), never dropped;
 * - headers as UTF-8 strings by name (a name repeated: the last value wins, as Kafka's
 *   `lastHeader`; a null value is absent); BabelQueue's `bq-attempts` (digits only) and
 *   `bq-schema-version` are read from them.
 * Records come out grouped by partition (in the event's order), each partition in offset order.
 *
 * What this is *not*: the verdict (the engine's) or the partial batch response (lambda-kafka.ts).
 */
import type { MSKRecord } from "aws-lambda";
import { SCHEMA_VERSION_PROPERTY } from "../src/schema-gate.js";

/** BabelQueue's Kafka header carrying the envelope's attempts: authoritative on consume. */
export const ATTEMPTS_HEADER = "bq-attempts";

/** One record of the event, read. */
export interface KafkaRecordView {
  /** The record as Lambda delivered it (possibly malformed). */
  readonly record: MSKRecord;
  /** `<topic>-<partition>`, the partial batch response's `partition`, or undefined if unknown. */
  readonly partition: string | undefined;
  /** The record's offset, or undefined if unknown. */
  readonly offset: number | undefined;
  /** The value's bytes, when the record could be read. */
  readonly value?: Uint8Array;
  /** Why the record cannot be decoded at all (no value, bad base64, bad headers). */
  readonly unreadable?: string;
  /** Header values as UTF-8 strings, by name. */
  readonly headers: Readonly<Record<string, string>>;
  /** `bq-attempts` as a number, when present and made of digits. */
  readonly attempts?: number;
  /** `bq-schema-version`'s value, or undefined when the header is absent. */
  readonly schemaVersion?: string;
}

// Strict base64 as a length rule and one character class: no repeated group, so no backtracking
// state per character (a group of four exhausted V8's stack past about 4.47 million characters, and a
// record of 3.4 MB failed the whole invocation on every retry).
const BASE64_CHARACTERS = /^[A-Za-z0-9+/]*={0,2}$/;

function isStrictBase64(text: string): boolean {
  return text.length % 4 === 0 && BASE64_CHARACTERS.test(text);
}
// ignoreBOM: keep a leading U+FEFF in the value. Stripping it would turn a `bq-schema-version` of
// "\uFEFF" (which the gate must reject) into "" (which it decodes).
const utf8 = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An own data property only: never a getter, never the prototype chain. */
function own(record: Record<string, unknown>, field: string): unknown {
  const descriptor = Object.getOwnPropertyDescriptor(record, field);
  return descriptor && "value" in descriptor ? descriptor.value : undefined;
}

/** A safe integer >= 0, from a number or a string of digits. */
function counter(value: unknown): number | undefined {
  const number = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : value;
  return typeof number === "number" && Number.isSafeInteger(number) && number >= 0 ? number : undefined;
}

/** A header value's bytes: an array of integers in -128..255 (each modulo 256), else undefined. */
function headerBytes(value: unknown): Uint8Array | undefined {
  if (!Array.isArray(value)) return undefined;
  const bytes = new Uint8Array(value.length);
  for (let i = 0; i < value.length; i += 1) {
    const byte = value[i] as unknown;
    if (typeof byte !== "number" || !Number.isInteger(byte) || byte < -128 || byte > 255) return undefined;
    bytes[i] = byte & 0xff;
  }
  return bytes;
}

/** The record's headers as strings, or undefined when they are malformed. */
function headersOf(raw: unknown): Record<string, string> | undefined {
  const headers: Record<string, string> = {};
  if (raw === undefined || raw === null) return headers;
  if (!Array.isArray(raw)) return undefined;
  for (const entry of raw as unknown[]) {
    if (!isObject(entry)) return undefined;
    for (const name of Object.keys(entry)) {
      const value = own(entry, name);
      if (value === null) {
        Reflect.deleteProperty(headers, name);
        continue;
      }
      const bytes = headerBytes(value);
      if (bytes === undefined) return undefined;
      Object.defineProperty(headers, name, { value: utf8.decode(bytes), enumerable: true, writable: true, configurable: true });
    }
  }
  return headers;
}

/** The base64 value's bytes, or the reason the record has none. */
function valueBytes(raw: unknown): Uint8Array | string {
  if (raw === undefined || raw === null) return "the Kafka record has no value (a tombstone?)";
  if (typeof raw !== "string" || !isStrictBase64(raw)) return "the Kafka record's value is not base64";
  const buffer = Buffer.from(raw, "base64");
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

/** One record, read; `key` is the `<topic>-<partition>` it sits under in the event. */
export function viewOf(raw: unknown, key: string): KafkaRecordView {
  const record = (isObject(raw) ? raw : {}) as Record<string, unknown>;
  const topic = own(record, "topic");
  const partitionNumber = counter(own(record, "partition"));
  const partition = typeof topic === "string" && topic !== "" && partitionNumber !== undefined ? `${topic}-${partitionNumber}` : key !== "" ? key : undefined;
  const offset = counter(own(record, "offset"));
  const identity = { record: raw as MSKRecord, partition, offset };
  if (!isObject(raw)) return { ...identity, headers: {}, unreadable: "the Kafka record is not an object" };
  const headers = headersOf(own(record, "headers"));
  if (headers === undefined) return { ...identity, headers: {}, unreadable: "the Kafka record's headers are not byte arrays" };
  const attempts = Object.hasOwn(headers, ATTEMPTS_HEADER) ? counter(headers[ATTEMPTS_HEADER]) : undefined;
  const read = {
    ...identity,
    headers,
    ...(attempts === undefined ? {} : { attempts }),
    ...(Object.hasOwn(headers, SCHEMA_VERSION_PROPERTY) ? { schemaVersion: headers[SCHEMA_VERSION_PROPERTY] as string } : {}),
  };
  const value = valueBytes(own(record, "value"));
  return typeof value === "string" ? { ...read, unreadable: value } : { ...read, value };
}

/** `viewOf`, and if reading the record throws after all (a limit of the runtime), an unreadable record: never a failed event. */
function readRecord(raw: unknown, key: string): KafkaRecordView {
  try {
    return viewOf(raw, key);
  } catch {
    const record = (isObject(raw) ? raw : {}) as Record<string, unknown>;
    const offset = counter(own(record, "offset"));
    return { record: raw as MSKRecord, partition: key !== "" ? key : undefined, offset, headers: {}, unreadable: "the Kafka record could not be read" };
  }
}

/** Every record of the event, grouped by partition (the event's order), each partition in offset order. */
export function recordsOf(event: unknown): KafkaRecordView[] {
  const records = isObject(event) ? own(event, "records") : undefined;
  if (!isObject(records)) return [];
  const byPartition = new Map<string, KafkaRecordView[]>();
  const unknown: KafkaRecordView[] = [];
  for (const key of Object.keys(records)) {
    const list = own(records, key);
    if (!Array.isArray(list)) continue;
    for (const raw of list as unknown[]) {
      const view = readRecord(raw, key);
      if (view.partition === undefined) {
        unknown.push(view);
        continue;
      }
      let group = byPartition.get(view.partition);
      if (group === undefined) {
        group = [];
        byPartition.set(view.partition, group);
      }
      group.push(view);
    }
  }
  const inOrder = (a: KafkaRecordView, b: KafkaRecordView) =>
    a.offset === b.offset ? 0 : a.offset === undefined ? 1 : b.offset === undefined ? -1 : a.offset - b.offset;
  // Array.prototype.sort is stable: records without an offset keep their place after the others.
  return [...[...byPartition.values()].flatMap((group) => group.sort(inOrder)), ...unknown];
}
