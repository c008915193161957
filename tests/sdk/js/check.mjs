// The AWS SDK for JavaScript v3's Kinesis client against llog serve's Kinesis API (AWS JSON 1.1): every operation a
// producer and a polling consumer use, the iterators of each type, and the errors the SDK must map to its exception
// classes; the same checks as tests/sdk/java's Main.
//
// node check.mjs <endpoint> <region> <access key id> <secret access key> <stream>, or the environment variables
// KINESIS_ENDPOINT, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, KINESIS_STREAM. Prints one line per check;
// any mismatch prints "FAIL: ..." and exits 1.
import {
  CreateStreamCommand,
  DeleteStreamCommand,
  DescribeStreamCommand,
  DescribeStreamSummaryCommand,
  GetRecordsCommand,
  GetShardIteratorCommand,
  InvalidArgumentException,
  KinesisClient,
  ListShardsCommand,
  ListStreamsCommand,
  PutRecordCommand,
  PutRecordsCommand,
  ResourceInUseException,
  ResourceNotFoundException,
  ValidationException,
} from "@aws-sdk/client-kinesis";
import { NodeHttpHandler } from "@smithy/node-http-handler";

const JSON_1_1 = "application/x-amz-json-1.1";
const MAX_HASH_KEY = 2n ** 128n - 1n;
const ACTIVE_WITHIN_MS = 60_000;
// Arrival times are the server's milliseconds; the server runs on this machine's clock.
const CLOCK_SLACK_MS = 5_000;
// Between the clock reading that starts AT_TIMESTAMP's range and the records on either side of it.
const TIMESTAMP_GAP_MS = 300;

class Mismatch extends Error {}

function argument(index, variable) {
  const value = process.argv[2 + index] ?? process.env[variable];
  if (!value) {
    console.error("usage: node check.mjs <endpoint> <region> <access key id> <secret access key> <stream>");
    console.error(`(or the environment variable ${variable})`);
    process.exit(2);
  }
  return value;
}

const endpoint = argument(0, "KINESIS_ENDPOINT");
const region = argument(1, "AWS_REGION");
const accessKeyId = argument(2, "AWS_ACCESS_KEY_ID");
const secretAccessKey = argument(3, "AWS_SECRET_ACCESS_KEY");
const stream = argument(4, "KINESIS_STREAM");

// The Kinesis client's default handler speaks HTTP/2 only (SubscribeToShard's event stream needs it): to an http://
// endpoint, h2c with prior knowledge. llog serve speaks HTTP/1.1, as a client must then be told.
const kinesis = new KinesisClient({
  endpoint,
  region,
  credentials: { accessKeyId, secretAccessKey },
  requestHandler: new NodeHttpHandler(),
});
const encodingMismatches = [];
// Every request and answer must be AWS JSON 1.1, errors included.
kinesis.middlewareStack.add(
  (next) => async (args) => {
    const sent = args.request.headers["content-type"];
    const target = args.request.headers["x-amz-target"];
    if (sent !== JSON_1_1) encodingMismatches.push(`${target} was sent as ${sent}`);
    const answerType = (response) => response?.headers?.["content-type"] ?? "(none)";
    try {
      const result = await next(args);
      if (!answerType(result.response).startsWith(JSON_1_1)) {
        encodingMismatches.push(`the answer to ${target} came as ${answerType(result.response)}`);
      }
      return result;
    } catch (error) {
      if (error.$response && !answerType(error.$response).startsWith(JSON_1_1)) {
        encodingMismatches.push(`the error answer to ${target} came as ${answerType(error.$response)}`);
      }
      throw error;
    }
  },
  { step: "finalizeRequest", name: "llogEncodingCheck" },
);

let checks = 0;
function check(condition, what) {
  if (!condition) throw new Mismatch(what);
  if (encodingMismatches.length) throw new Mismatch(`wrong encoding: ${encodingMismatches.join("; ")}`);
  checks += 1;
  console.log(`ok ${what}`);
}

const send = (command) => kinesis.send(command);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const bytes = (text) => new TextEncoder().encode(text);
const sameBytes = (a, b) => a.length === b.length && a.every((value, i) => value === b[i]);
const sequenceNumbers = (records) => records.map((r) => r.SequenceNumber);
const sameList = (a, b) => a.length === b.length && a.every((value, i) => value === b[i]);

async function expectError(type, code, call, what) {
  try {
    await call();
  } catch (error) {
    if (error instanceof Mismatch) throw error;
    check(
      error instanceof type && error.name === code && error.$metadata?.httpStatusCode === 400 && !!error.message,
      `${what}: ${code} (got ${error.name}, status ${error.$metadata?.httpStatusCode}, message '${error.message}')`,
    );
    return;
  }
  throw new Mismatch(`${what}: expected ${code}, the call succeeded`);
}

async function poll(attempt, what) {
  const deadline = Date.now() + ACTIVE_WITHIN_MS;
  while (Date.now() < deadline) {
    const result = await attempt();
    if (result !== undefined) {
      check(true, what);
      return result;
    }
    await sleep(200);
  }
  throw new Mismatch(`waited ${ACTIVE_WITHIN_MS} ms for ${what}`);
}

async function iterator(ShardId, ShardIteratorType, StartingSequenceNumber, Timestamp) {
  const answer = await send(
    new GetShardIteratorCommand({ StreamName: stream, ShardId, ShardIteratorType, StartingSequenceNumber, Timestamp }),
  );
  return answer.ShardIterator;
}

// GetRecords from `shardIterator` until an answer says the shard's end is reached (no record, 0 behind).
async function readAll(shardId, shardIterator) {
  const records = [];
  let next = shardIterator;
  for (let call = 0; call < 100; call += 1) {
    const answer = await send(new GetRecordsCommand({ ShardIterator: next, Limit: 3 }));
    records.push(...answer.Records);
    next = answer.NextShardIterator;
    if (!next || (answer.Records.length === 0 && answer.MillisBehindLatest === 0)) return records;
  }
  throw new Mismatch(`GetRecords on ${shardId} never reached the end of the shard`);
}

function checkShards(listed, described) {
  check(listed.length === 2, "ListShards: 2 shards");
  const ids = listed.map((s) => s.ShardId);
  check(sameList(ids, described.map((s) => s.ShardId)), `ListShards: the shards DescribeStream names ${ids}`);
  let expectedStart = 0n;
  for (const shard of listed) {
    const start = BigInt(shard.HashKeyRange.StartingHashKey);
    const end = BigInt(shard.HashKeyRange.EndingHashKey);
    check(start === expectedStart && end > start, `ListShards: ${shard.ShardId} hash keys ${start}..${end}`);
    check(!!shard.SequenceNumberRange?.StartingSequenceNumber,
      `ListShards: ${shard.ShardId} has a starting sequence number`);
    expectedStart = end + 1n;
  }
  check(expectedStart === MAX_HASH_KEY + 1n, "ListShards: the hash key ranges cover 0..2^128-1");
}

// A shard's records as TRIM_HORIZON read them, against what the puts answered.
function checkRecords(shardId, records, puts, notBefore) {
  const bySequence = new Map(puts.map((put) => [put.sequenceNumber, put]));
  let previous = -1n;
  for (const record of records) {
    const put = bySequence.get(record.SequenceNumber);
    check(put?.shardId === shardId, `GetRecords ${shardId}: ${record.SequenceNumber} is a record put to this shard`);
    check(put.partitionKey === record.PartitionKey, `GetRecords ${shardId}: partition key ${record.PartitionKey}`);
    check(sameBytes(put.data, record.Data), `GetRecords ${shardId}: data of ${record.Data.length} bytes`);
    const sequence = BigInt(record.SequenceNumber);
    check(sequence > previous, `GetRecords ${shardId}: sequence numbers increase`);
    previous = sequence;
    const arrival = record.ApproximateArrivalTimestamp;
    check(
      arrival instanceof Date && arrival >= notBefore && arrival.getTime() < Date.now() + CLOCK_SLACK_MS,
      `GetRecords ${shardId}: ApproximateArrivalTimestamp is now (${arrival?.toISOString()})`,
    );
  }
  const putHere = puts.filter((p) => p.shardId === shardId).length;
  check(records.length === putHere, `GetRecords ${shardId}: all ${putHere} records put to it`);
}

const entry = (PartitionKey, Data, ExplicitHashKey) => ({ PartitionKey, Data, ExplicitHashKey });

async function run() {
  console.log(`kinesis js sdk: ${JSON_1_1} stream ${stream}`);
  const createdAfter = new Date(Date.now() - CLOCK_SLACK_MS);
  await send(new CreateStreamCommand({ StreamName: stream, ShardCount: 2 }));
  const summary = await poll(async () => {
    const answer = await send(new DescribeStreamSummaryCommand({ StreamName: stream }));
    return answer.StreamDescriptionSummary.StreamStatus === "ACTIVE" ? answer.StreamDescriptionSummary : undefined;
  }, "the stream to be ACTIVE");
  check(summary.OpenShardCount === 2, `DescribeStreamSummary: 2 open shards (${summary.OpenShardCount})`);
  check(
    summary.StreamCreationTimestamp >= createdAfter
      && summary.StreamCreationTimestamp.getTime() < Date.now() + CLOCK_SLACK_MS,
    `DescribeStreamSummary: StreamCreationTimestamp is now (${summary.StreamCreationTimestamp.toISOString()})`,
  );

  const described = (await send(new DescribeStreamCommand({ StreamName: stream }))).StreamDescription;
  check(
    described.StreamStatus === "ACTIVE" && described.StreamName === stream
      && described.Shards.length === 2 && !described.HasMoreShards,
    "DescribeStream: ACTIVE with 2 shards",
  );
  check(described.StreamCreationTimestamp >= createdAfter, "DescribeStream: StreamCreationTimestamp is now");

  check((await send(new ListStreamsCommand({}))).StreamNames.includes(stream), "ListStreams: names the stream");

  const shards = (await send(new ListShardsCommand({ StreamName: stream }))).Shards;
  checkShards(shards, described.Shards);

  await expectError(ResourceNotFoundException, "ResourceNotFoundException",
    () => send(new DescribeStreamSummaryCommand({ StreamName: `${stream}-missing` })),
    "DescribeStreamSummary of an unknown stream");
  await expectError(ResourceInUseException, "ResourceInUseException",
    () => send(new CreateStreamCommand({ StreamName: stream, ShardCount: 2 })), "CreateStream of an existing stream");

  const puts = [];
  const first = bytes("first \u0000\u00ff");
  const put = await send(new PutRecordCommand({ StreamName: stream, PartitionKey: "pk-first", Data: first }));
  puts.push({ partitionKey: "pk-first", data: first, shardId: put.ShardId, sequenceNumber: put.SequenceNumber });
  check(put.ShardId.startsWith("shardId-") && /^\d+$/.test(put.SequenceNumber),
    `PutRecord: ${put.ShardId} ${put.SequenceNumber}`);

  await sleep(TIMESTAMP_GAP_MS);
  const between = new Date();
  await sleep(TIMESTAMP_GAP_MS);

  await expectError(ValidationException, "ValidationException",
    () => send(new PutRecordsCommand({
      StreamName: stream,
      Records: [entry("pk-rejected", bytes("rejected")), entry("k".repeat(257), bytes("too long a key"))],
    })),
    "PutRecords with a 257-character partition key");

  const entries = [];
  for (let i = 0; i < 4; i += 1) entries.push(entry(`pk-${i}`, new Uint8Array([i, 0, 0x80, 0xff, 0x78])));
  entries.push(entry("clé-ü-\u6f22", bytes("unicode key")));
  entries.push(entry("explicit-0", bytes("to shard 0"), "0"));
  entries.push(entry("explicit-1", bytes("to shard 0 again"), "1"));
  const large = new Uint8Array(70_000).map((_, i) => (i * 31) & 0xff);
  entries.push(entry("explicit-max", large, MAX_HASH_KEY.toString()));
  const putMany = await send(new PutRecordsCommand({ StreamName: stream, Records: entries }));
  check(putMany.FailedRecordCount === 0 && putMany.Records.length === entries.length,
    `PutRecords: ${entries.length} records, none failed`);
  putMany.Records.forEach((result, i) => {
    check(!result.ErrorCode && result.ShardId && result.SequenceNumber,
      `PutRecords: record ${i} went to ${result.ShardId}`);
    const { PartitionKey: partitionKey, Data: data } = entries[i];
    puts.push({ partitionKey, data, shardId: result.ShardId, sequenceNumber: result.SequenceNumber });
  });
  const shard0 = shards[0].ShardId;
  const lastShard = shards[shards.length - 1].ShardId;
  check(
    puts.at(-3).shardId === shard0 && puts.at(-2).shardId === shard0 && puts.at(-1).shardId === lastShard,
    `PutRecords: ExplicitHashKey 0 and 1 went to ${shard0}, 2^128-1 to ${lastShard}`,
  );

  const read = new Map();
  for (const shard of shards) {
    const records = await readAll(shard.ShardId, await iterator(shard.ShardId, "TRIM_HORIZON"));
    read.set(shard.ShardId, records);
    checkRecords(shard.ShardId, records, puts, createdAfter);
  }
  check([...read.values()].reduce((n, records) => n + records.length, 0) === puts.length,
    "TRIM_HORIZON: every record put, and only those (not the rejected PutRecords' first)");

  for (const shard of shards) {
    const all = read.get(shard.ShardId);
    const after = await readAll(shard.ShardId, await iterator(shard.ShardId, "AT_TIMESTAMP", undefined, between));
    const expected = all.filter((r) => r.PartitionKey !== "pk-first");
    check(sameList(sequenceNumbers(after), sequenceNumbers(expected)),
      `AT_TIMESTAMP ${between.toISOString()} on ${shard.ShardId}: the ${expected.length} records put after it`
        + ` (got ${after.length})`);
    const fromStart = await readAll(shard.ShardId,
      await iterator(shard.ShardId, "AT_TIMESTAMP", undefined, createdAfter));
    check(sameList(sequenceNumbers(fromStart), sequenceNumbers(all)),
      `AT_TIMESTAMP before the stream on ${shard.ShardId}: all ${all.length} records`);
  }

  const onShard0 = read.get(shard0);
  check(onShard0.length >= 2, `${shard0} holds at least 2 records (${onShard0.length})`);
  const secondSequence = onShard0[1].SequenceNumber;
  const at = await readAll(shard0, await iterator(shard0, "AT_SEQUENCE_NUMBER", secondSequence));
  check(sameList(sequenceNumbers(at), sequenceNumbers(onShard0.slice(1))),
    `AT_SEQUENCE_NUMBER ${secondSequence}: from that record on`);
  const afterSequence = await readAll(shard0, await iterator(shard0, "AFTER_SEQUENCE_NUMBER", secondSequence));
  check(sameList(sequenceNumbers(afterSequence), sequenceNumbers(onShard0.slice(2))),
    `AFTER_SEQUENCE_NUMBER ${secondSequence}: the records after it`);

  const latestShard = shards[1];
  const latest = await iterator(latestShard.ShardId, "LATEST");
  const nothingYet = await send(new GetRecordsCommand({ ShardIterator: latest }));
  check(nothingYet.Records.length === 0 && !!nothingYet.NextShardIterator,
    `LATEST on ${latestShard.ShardId}: no record yet, a next iterator`);
  const newest = bytes("after LATEST");
  const late = await send(new PutRecordCommand({
    StreamName: stream,
    PartitionKey: "pk-late",
    ExplicitHashKey: latestShard.HashKeyRange.StartingHashKey,
    Data: newest,
  }));
  check(late.ShardId === latestShard.ShardId, `PutRecord with ExplicitHashKey: to ${late.ShardId}`);
  const sinceLatest = await readAll(latestShard.ShardId, nothingYet.NextShardIterator);
  check(
    sinceLatest.length === 1 && sinceLatest[0].SequenceNumber === late.SequenceNumber
      && sameBytes(sinceLatest[0].Data, newest),
    "LATEST: then exactly the record put after it");

  await expectError(InvalidArgumentException, "InvalidArgumentException",
    () => iterator(shard0, "AT_SEQUENCE_NUMBER", "12345"), "GetShardIterator at sequence number 12345");
  await expectError(InvalidArgumentException, "InvalidArgumentException",
    () => iterator(shard0, "AFTER_SEQUENCE_NUMBER", late.SequenceNumber),
    `GetShardIterator on ${shard0} after a sequence number of ${late.ShardId}`);
  await expectError(ResourceNotFoundException, "ResourceNotFoundException",
    () => iterator("shardId-000000000009", "TRIM_HORIZON"), "GetShardIterator of an unknown shard");

  await send(new DeleteStreamCommand({ StreamName: stream }));
  await poll(async () => {
    try {
      const answer = await send(new DescribeStreamSummaryCommand({ StreamName: stream }));
      const status = answer.StreamDescriptionSummary.StreamStatus;
      if (status !== "DELETING") throw new Mismatch(`after DeleteStream the stream is ${status}`);
      return undefined;
    } catch (error) {
      if (error instanceof ResourceNotFoundException) return true;
      throw error;
    }
  }, "DeleteStream to remove the stream");
  check(!(await send(new ListStreamsCommand({}))).StreamNames.includes(stream), "DeleteStream: the stream is gone");
  console.log(`PASS kinesis js sdk ${JSON_1_1}: ${checks} checks`);
}

try {
  await run();
} catch (error) {
  console.log(`FAIL: ${error instanceof Mismatch ? error.message : error.stack ?? error}`);
  process.exitCode = 1;
} finally {
  kinesis.destroy();
}
