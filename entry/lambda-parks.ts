/**
 * `babelqueue-serverless/lambda/parks`: `sqsParks`, the extension `sqsHandler`'s `parks` option takes
 * — a parked SQS record comes back right after the lease ends, not after the queue's visibility
 * timeout. Its own subpath because it imports `@aws-sdk/client-sqs`: `babelqueue-serverless/lambda`
 * names no SQS client, so an application without parks neither installs nor bundles one.
 *
 * The list is deliberate and pinned by test/package/exports.test.ts.
 *
 * @module babelqueue-serverless/lambda/parks
 */
export { type ParkOptions, type ParkOutcome, type SqsClientLike, type SqsParks, sqsParks } from "../handlers/sqs-parks.js";
