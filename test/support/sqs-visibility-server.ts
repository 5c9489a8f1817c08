/**
 * A loopback stand-in for the one SQS API call `sqsHandler`'s `parks` makes:
 * `ChangeMessageVisibilityBatch`, in SQS's JSON protocol (`X-Amz-Target:
 * AmazonSQS.ChangeMessageVisibilityBatch`, AWS JSON 1.0), as `@aws-sdk/client-sqs` sends it. It records
 * every request and answers every entry Successful — or Failed for the receipt handles the test names.
 *
 * No SQS emulator installs from npm or apt here (ElasticMQ is not packaged), so the real client talks
 * to this over real HTTP: the request is exactly what AWS would receive; only the queue behind it is
 * the test's.
 *
 * What this is *not*: a queue. It keeps no messages; the reliability suite simulates the queue.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface VisibilityRequest {
  readonly queueUrl: string;
  readonly entries: readonly { readonly Id: string; readonly ReceiptHandle: string; readonly VisibilityTimeout: number }[];
}

export interface VisibilityServer {
  readonly endpoint: string;
  readonly requests: VisibilityRequest[];
  /** Receipt handles whose changes are answered Failed. */
  readonly refuse: Set<string>;
  close(): Promise<void>;
}

export async function startVisibilityServer(): Promise<VisibilityServer> {
  const requests: VisibilityRequest[] = [];
  const refuse = new Set<string>();
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const target = String(request.headers["x-amz-target"] ?? "");
      if (target !== "AmazonSQS.ChangeMessageVisibilityBatch") {
        response.writeHead(400, { "content-type": "application/x-amz-json-1.0" });
        response.end(JSON.stringify({ __type: "com.amazonaws.sqs#InvalidAction", message: `unexpected ${target}` }));
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { QueueUrl: string; Entries: VisibilityRequest["entries"] };
      requests.push({ queueUrl: body.QueueUrl, entries: body.Entries });
      const failed = body.Entries.filter((entry) => refuse.has(entry.ReceiptHandle));
      response.writeHead(200, { "content-type": "application/x-amz-json-1.0" });
      response.end(
        JSON.stringify({
          Successful: body.Entries.filter((entry) => !refuse.has(entry.ReceiptHandle)).map((entry) => ({ Id: entry.Id })),
          Failed: failed.map((entry) => ({ Id: entry.Id, SenderFault: true, Code: "ReceiptHandleIsInvalid", Message: "refused by the test" })),
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    refuse,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
