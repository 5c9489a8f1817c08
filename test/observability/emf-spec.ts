/**
 * A checker of the CloudWatch Embedded Metric Format specification (AWS, "Specification: Embedded
 * metric format"), for the metrics tests. Returns the list of violations (empty when valid):
 *
 * - the root is a JSON object with `_aws` = { Timestamp: epoch ms number, CloudWatchMetrics: [MetricDirective…] };
 * - a MetricDirective is { Namespace: string (1–255), Dimensions: [DimensionSet…], Metrics: [MetricDefinition…] (≤ 100) };
 * - a DimensionSet is an array of ≤ 30 strings, each a root member whose value is a string (≤ 1024 chars);
 * - a MetricDefinition is { Name: string (1–255), Unit?: a CloudWatch unit, StorageResolution?: 1 | 60 }
 *   and nothing else; its Name is a root member whose value is a number or an array of ≤ 100 numbers;
 * - the document is at most 1 MB.
 */
const UNITS = new Set([
  "Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
  "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second",
  "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second",
  "Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None",
]);

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);
const isFiniteNumber = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value);

/**
 * Whether `value` is an object (if not, that is a problem and the caller skips it); members other
 * than `members` are a problem too, but the object is still checked.
 */
function objectWithMembers(value: unknown, kind: string, members: readonly string[], problems: string[]): value is Record<string, unknown> {
  if (!isObject(value)) {
    problems.push(`a ${kind} is not an object`);
    return false;
  }
  const extra = Object.keys(value).filter((key) => !members.includes(key));
  if (extra.length > 0) problems.push(`${kind} has extra members ${extra.join(",")}`);
  return true;
}

export function emfViolations(line: string): string[] {
  const problems: string[] = [];
  if (new TextEncoder().encode(line).length > 1024 * 1024) problems.push("larger than 1 MB");
  let root: unknown;
  try {
    root = JSON.parse(line);
  } catch {
    return ["not JSON"];
  }
  if (!isObject(root)) return ["root is not an object"];
  const aws = root._aws;
  if (!isObject(aws)) return ["no _aws object"];
  if (!isFiniteNumber(aws.Timestamp) || !Number.isInteger(aws.Timestamp) || aws.Timestamp < 1e12) problems.push("_aws.Timestamp is not epoch milliseconds");
  if (!Array.isArray(aws.CloudWatchMetrics)) return [...problems, "_aws.CloudWatchMetrics is not an array"];
  for (const directive of aws.CloudWatchMetrics as unknown[]) {
    if (!objectWithMembers(directive, "MetricDirective", ["Namespace", "Dimensions", "Metrics"], problems)) continue;
    if (typeof directive.Namespace !== "string" || directive.Namespace.length < 1 || directive.Namespace.length > 255) problems.push("Namespace");
    if (!Array.isArray(directive.Dimensions)) problems.push("Dimensions is not an array");
    else {
      for (const set of directive.Dimensions as unknown[]) {
        if (!Array.isArray(set) || set.length > 30) {
          problems.push("a DimensionSet is not an array of at most 30");
          continue;
        }
        for (const name of set as unknown[]) {
          if (typeof name !== "string") problems.push("a dimension name is not a string");
          else if (typeof root[name] !== "string" || (root[name] as string).length > 1024) problems.push(`dimension ${name} has no string value on the root`);
        }
      }
    }
    if (!Array.isArray(directive.Metrics) || directive.Metrics.length > 100) {
      problems.push("Metrics is not an array of at most 100");
      continue;
    }
    for (const definition of directive.Metrics as unknown[]) {
      if (!objectWithMembers(definition, "MetricDefinition", ["Name", "Unit", "StorageResolution"], problems)) continue;
      const name = definition.Name;
      if (typeof name !== "string" || name.length < 1 || name.length > 255) {
        problems.push("a metric Name is not a string of 1-255");
        continue;
      }
      if (definition.Unit !== undefined && !UNITS.has(definition.Unit as string)) problems.push(`${name}: unit ${String(definition.Unit)}`);
      if (definition.StorageResolution !== undefined && definition.StorageResolution !== 1 && definition.StorageResolution !== 60) {
        problems.push(`${name}: StorageResolution`);
      }
      const value = root[name];
      const valid = isFiniteNumber(value) || (Array.isArray(value) && value.length >= 1 && value.length <= 100 && value.every(isFiniteNumber));
      if (!valid) problems.push(`${name}: the root value is not a number or an array of at most 100 numbers`);
    }
  }
  return problems;
}
