import java.math.BigInteger;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Supplier;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.SdkBytes;
import software.amazon.awssdk.core.interceptor.Context;
import software.amazon.awssdk.core.interceptor.ExecutionAttributes;
import software.amazon.awssdk.core.interceptor.ExecutionInterceptor;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.kinesis.KinesisClient;
import software.amazon.awssdk.services.kinesis.model.DescribeStreamResponse;
import software.amazon.awssdk.services.kinesis.model.GetRecordsResponse;
import software.amazon.awssdk.services.kinesis.model.InvalidArgumentException;
import software.amazon.awssdk.services.kinesis.model.KinesisException;
import software.amazon.awssdk.services.kinesis.model.PutRecordResponse;
import software.amazon.awssdk.services.kinesis.model.PutRecordsRequestEntry;
import software.amazon.awssdk.services.kinesis.model.PutRecordsResponse;
import software.amazon.awssdk.services.kinesis.model.PutRecordsResultEntry;
import software.amazon.awssdk.services.kinesis.model.Record;
import software.amazon.awssdk.services.kinesis.model.ResourceInUseException;
import software.amazon.awssdk.services.kinesis.model.ResourceNotFoundException;
import software.amazon.awssdk.services.kinesis.model.Shard;
import software.amazon.awssdk.services.kinesis.model.ShardIteratorType;
import software.amazon.awssdk.services.kinesis.model.StreamDescriptionSummary;
import software.amazon.awssdk.services.kinesis.model.StreamStatus;
import software.amazon.awssdk.services.kinesis.model.ValidationException;

/**
 * The AWS SDK for Java v2's Kinesis client against llog serve's Kinesis API: every operation a producer and a
 * polling consumer use, the iterators of each type, and the errors the SDK must map to its exception classes.
 *
 * <p>Arguments (or the environment variables named in brackets): endpoint [KINESIS_ENDPOINT], region
 * [AWS_REGION], access key id [AWS_ACCESS_KEY_ID], secret access key [AWS_SECRET_ACCESS_KEY], stream name
 * [KINESIS_STREAM]. The SDK speaks CBOR unless started with {@code -Daws.cborEnabled=false} (the SDK's own
 * setting, also read from the environment variable {@code CBOR_ENABLED}); every request and answer is checked
 * to be in that encoding. Prints one line per check; any mismatch prints {@code FAIL: ...} and exits 1.
 */
public final class Main {
    private static final String CBOR = "application/x-amz-cbor-1.1";
    private static final String JSON = "application/x-amz-json-1.1";
    private static final BigInteger MAX_HASH_KEY = BigInteger.TWO.pow(128).subtract(BigInteger.ONE);
    private static final Duration ACTIVE_WITHIN = Duration.ofSeconds(60);
    /** Kinesis's arrival times are the server's milliseconds; the server runs on this machine's clock. */
    private static final Duration CLOCK_SLACK = Duration.ofSeconds(5);
    /** Between the clock reading that starts AT_TIMESTAMP's range and the records on either side of it. */
    private static final long TIMESTAMP_GAP_MS = 300;

    private final KinesisClient kinesis;
    private final String stream;
    private final String contentType;
    private final List<String> encodingMismatches = new CopyOnWriteArrayList<>();
    private int checks;

    static final class Mismatch extends RuntimeException {
        Mismatch(String message) {
            super(message);
        }
    }

    /** One record as it was put: where Kinesis said it went. */
    record Put(String partitionKey, byte[] data, String shardId, String sequenceNumber) {}

    private Main(String endpoint, String region, String accessKey, String secret, String stream) {
        boolean cbor = !"false".equalsIgnoreCase(System.getProperty("aws.cborEnabled",
                System.getenv().getOrDefault("CBOR_ENABLED", "true")));
        this.contentType = cbor ? CBOR : JSON;
        this.stream = stream;
        this.kinesis = KinesisClient.builder()
                .endpointOverride(URI.create(endpoint))
                .region(Region.of(region))
                .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create(accessKey, secret)))
                .overrideConfiguration(c -> c.addExecutionInterceptor(new EncodingCheck())
                        .apiCallTimeout(Duration.ofSeconds(60)))
                .build();
    }

    /** Records every request and answer whose Content-Type is not the encoding this run speaks. */
    private final class EncodingCheck implements ExecutionInterceptor {
        @Override
        public void beforeTransmission(Context.BeforeTransmission context, ExecutionAttributes attributes) {
            String sent = context.httpRequest().firstMatchingHeader("Content-Type").orElse("(none)");
            String target = context.httpRequest().firstMatchingHeader("X-Amz-Target").orElse("(none)");
            if (!sent.equals(contentType)) {
                encodingMismatches.add(target + " was sent as " + sent);
            }
        }

        @Override
        public void afterTransmission(Context.AfterTransmission context, ExecutionAttributes attributes) {
            String answered = context.httpResponse().firstMatchingHeader("Content-Type").orElse("(none)");
            if (!answered.startsWith(contentType)) {
                encodingMismatches.add("an answer (status " + context.httpResponse().statusCode() + ") came as "
                        + answered + " to a request in " + contentType);
            }
        }
    }

    private void check(boolean condition, String what) {
        if (!condition) {
            throw new Mismatch(what);
        }
        if (!encodingMismatches.isEmpty()) {
            throw new Mismatch("wrong encoding: " + encodingMismatches);
        }
        checks++;
        System.out.println("ok " + what);
    }

    private static String show(byte[] data) {
        return data.length > 40 ? data.length + " bytes" : Arrays.toString(data);
    }

    /** The exception {@code call} must raise: its class, Kinesis's error code, a 400 and a message. */
    private <E extends KinesisException> void expectError(Class<E> type, String code, Runnable call, String what) {
        try {
            call.run();
        } catch (KinesisException e) {
            String got = e.awsErrorDetails() == null ? "(no details)" : e.awsErrorDetails().errorCode();
            String message = e.awsErrorDetails() == null ? null : e.awsErrorDetails().errorMessage();
            boolean expected = type.isInstance(e) && code.equals(got) && e.statusCode() == 400;
            check(expected && message != null && !message.isEmpty(),
                    what + ": " + code + " (got " + e.getClass().getSimpleName() + " " + got + ", status "
                            + e.statusCode() + ", message '" + e.getMessage() + "')");
            return;
        }
        throw new Mismatch(what + ": expected " + code + ", the call succeeded");
    }

    private void run() throws InterruptedException {
        System.out.println("kinesis java sdk: " + contentType + " stream " + stream);
        Instant createdAfter = Instant.now().minus(CLOCK_SLACK);
        kinesis.createStream(r -> r.streamName(stream).shardCount(2));
        StreamDescriptionSummary summary = waitForActive();
        check(summary.openShardCount() == 2, "DescribeStreamSummary: 2 open shards (" + summary.openShardCount() + ")");
        check(!summary.streamCreationTimestamp().isBefore(createdAfter)
                        && summary.streamCreationTimestamp().isBefore(Instant.now().plus(CLOCK_SLACK)),
                "DescribeStreamSummary: StreamCreationTimestamp is now (" + summary.streamCreationTimestamp() + ")");

        DescribeStreamResponse described = kinesis.describeStream(r -> r.streamName(stream));
        check(described.streamDescription().streamStatus() == StreamStatus.ACTIVE
                        && stream.equals(described.streamDescription().streamName())
                        && described.streamDescription().shards().size() == 2
                        && !described.streamDescription().hasMoreShards(),
                "DescribeStream: ACTIVE with 2 shards");
        check(!described.streamDescription().streamCreationTimestamp().isBefore(createdAfter),
                "DescribeStream: StreamCreationTimestamp is now ("
                        + described.streamDescription().streamCreationTimestamp() + ")");

        check(kinesis.listStreams().streamNames().contains(stream), "ListStreams: names the stream");

        List<Shard> shards = kinesis.listShards(r -> r.streamName(stream)).shards();
        checkShards(shards, described.streamDescription().shards());

        expectError(ResourceNotFoundException.class, "ResourceNotFoundException",
                () -> kinesis.describeStreamSummary(r -> r.streamName(stream + "-missing")),
                "DescribeStreamSummary of an unknown stream");
        expectError(ResourceInUseException.class, "ResourceInUseException",
                () -> kinesis.createStream(r -> r.streamName(stream).shardCount(2)),
                "CreateStream of an existing stream");

        List<Put> puts = new ArrayList<>();
        byte[] first = "first \u0000\u00ff".getBytes(StandardCharsets.UTF_8);
        PutRecordResponse put = kinesis.putRecord(r -> r.streamName(stream).partitionKey("pk-first")
                .data(SdkBytes.fromByteArray(first)));
        puts.add(new Put("pk-first", first, put.shardId(), put.sequenceNumber()));
        check(put.shardId().startsWith("shardId-") && put.sequenceNumber().matches("\\d+"),
                "PutRecord: " + put.shardId() + " " + put.sequenceNumber());

        Thread.sleep(TIMESTAMP_GAP_MS);
        Instant between = Instant.now();
        Thread.sleep(TIMESTAMP_GAP_MS);

        expectError(ValidationException.class, "ValidationException",
                () -> kinesis.putRecords(r -> r.streamName(stream).records(
                        entry("pk-rejected", "rejected".getBytes(StandardCharsets.UTF_8), null),
                        entry("k".repeat(257), "too long a key".getBytes(StandardCharsets.UTF_8), null))),
                "PutRecords with a 257-character partition key");

        List<PutRecordsRequestEntry> entries = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            entries.add(entry("pk-" + i, new byte[] {(byte) i, 0, (byte) 0x80, (byte) 0xff, 'x'}, null));
        }
        entries.add(entry("clé-ü-\u6f22", "unicode key".getBytes(StandardCharsets.UTF_8), null));
        entries.add(entry("explicit-0", "to shard 0".getBytes(StandardCharsets.UTF_8), "0"));
        entries.add(entry("explicit-1", "to shard 0 again".getBytes(StandardCharsets.UTF_8), "1"));
        byte[] large = new byte[70_000];
        for (int i = 0; i < large.length; i++) {
            large[i] = (byte) (i * 31);
        }
        entries.add(entry("explicit-max", large, MAX_HASH_KEY.toString()));
        PutRecordsResponse putMany = kinesis.putRecords(r -> r.streamName(stream).records(entries));
        check(putMany.failedRecordCount() == 0 && putMany.records().size() == entries.size(),
                "PutRecords: " + entries.size() + " records, none failed");
        for (int i = 0; i < entries.size(); i++) {
            PutRecordsResultEntry result = putMany.records().get(i);
            check(result.errorCode() == null && result.shardId() != null && result.sequenceNumber() != null,
                    "PutRecords: record " + i + " went to " + result.shardId());
            puts.add(new Put(entries.get(i).partitionKey(), entries.get(i).data().asByteArray(), result.shardId(),
                    result.sequenceNumber()));
        }
        String shard0 = shards.get(0).shardId();
        String lastShard = shards.get(shards.size() - 1).shardId();
        check(puts.get(puts.size() - 3).shardId().equals(shard0) && puts.get(puts.size() - 2).shardId().equals(shard0)
                        && puts.get(puts.size() - 1).shardId().equals(lastShard),
                "PutRecords: ExplicitHashKey 0 and 1 went to " + shard0 + ", 2^128-1 to " + lastShard);

        Map<String, List<Record>> read = new HashMap<>();
        for (Shard shard : shards) {
            List<Record> records = readAll(shard.shardId(), iterator(shard.shardId(), ShardIteratorType.TRIM_HORIZON,
                    null, null));
            read.put(shard.shardId(), records);
            checkRecords(shard.shardId(), records, puts, createdAfter);
        }
        check(read.values().stream().mapToInt(List::size).sum() == puts.size(),
                "TRIM_HORIZON: every record put, and only those (not the rejected PutRecords' first)");

        for (Shard shard : shards) {
            List<Record> all = read.get(shard.shardId());
            List<Record> after = readAll(shard.shardId(), iterator(shard.shardId(), ShardIteratorType.AT_TIMESTAMP,
                    null, between));
            List<Record> expected = all.stream().filter(r -> !"pk-first".equals(r.partitionKey())).toList();
            check(sequenceNumbers(after).equals(sequenceNumbers(expected)),
                    "AT_TIMESTAMP " + between + " on " + shard.shardId() + ": the " + expected.size()
                            + " records put after it (got " + after.size() + ")");
            List<Record> fromStart = readAll(shard.shardId(), iterator(shard.shardId(), ShardIteratorType.AT_TIMESTAMP,
                    null, createdAfter));
            check(sequenceNumbers(fromStart).equals(sequenceNumbers(all)),
                    "AT_TIMESTAMP before the stream on " + shard.shardId() + ": all " + all.size() + " records");
        }

        List<Record> onShard0 = read.get(shard0);
        check(onShard0.size() >= 2, shard0 + " holds at least 2 records (" + onShard0.size() + ")");
        String secondSequence = onShard0.get(1).sequenceNumber();
        List<Record> at = readAll(shard0, iterator(shard0, ShardIteratorType.AT_SEQUENCE_NUMBER, secondSequence, null));
        check(sequenceNumbers(at).equals(sequenceNumbers(onShard0.subList(1, onShard0.size()))),
                "AT_SEQUENCE_NUMBER " + secondSequence + ": from that record on");
        List<Record> afterSequence = readAll(shard0,
                iterator(shard0, ShardIteratorType.AFTER_SEQUENCE_NUMBER, secondSequence, null));
        check(sequenceNumbers(afterSequence).equals(sequenceNumbers(onShard0.subList(2, onShard0.size()))),
                "AFTER_SEQUENCE_NUMBER " + secondSequence + ": the records after it");

        Shard latestShard = shards.get(1);
        String latest = iterator(latestShard.shardId(), ShardIteratorType.LATEST, null, null);
        GetRecordsResponse nothingYet = kinesis.getRecords(r -> r.shardIterator(latest));
        check(nothingYet.records().isEmpty() && nothingYet.nextShardIterator() != null,
                "LATEST on " + latestShard.shardId() + ": no record yet, a next iterator");
        byte[] newest = "after LATEST".getBytes(StandardCharsets.UTF_8);
        PutRecordResponse late = kinesis.putRecord(r -> r.streamName(stream).partitionKey("pk-late")
                .explicitHashKey(latestShard.hashKeyRange().startingHashKey()).data(SdkBytes.fromByteArray(newest)));
        check(late.shardId().equals(latestShard.shardId()), "PutRecord with ExplicitHashKey: to " + late.shardId());
        List<Record> sinceLatest = readAll(latestShard.shardId(), nothingYet.nextShardIterator());
        check(sinceLatest.size() == 1 && sinceLatest.get(0).sequenceNumber().equals(late.sequenceNumber())
                        && Arrays.equals(sinceLatest.get(0).data().asByteArray(), newest),
                "LATEST: then exactly the record put after it");

        expectError(InvalidArgumentException.class,
                "InvalidArgumentException",
                () -> iterator(shard0, ShardIteratorType.AT_SEQUENCE_NUMBER, "12345", null),
                "GetShardIterator at sequence number 12345");
        expectError(InvalidArgumentException.class,
                "InvalidArgumentException",
                () -> iterator(shard0, ShardIteratorType.AFTER_SEQUENCE_NUMBER, late.sequenceNumber(), null),
                "GetShardIterator on " + shard0 + " after a sequence number of " + late.shardId());
        expectError(ResourceNotFoundException.class, "ResourceNotFoundException",
                () -> iterator("shardId-000000000009", ShardIteratorType.TRIM_HORIZON, null, null),
                "GetShardIterator of an unknown shard");

        kinesis.deleteStream(r -> r.streamName(stream));
        waitForGone();
        System.out.println("PASS kinesis java sdk " + contentType + ": " + checks + " checks");
    }

    private static PutRecordsRequestEntry entry(String partitionKey, byte[] data, String explicitHashKey) {
        return PutRecordsRequestEntry.builder().partitionKey(partitionKey).data(SdkBytes.fromByteArray(data))
                .explicitHashKey(explicitHashKey).build();
    }

    private String iterator(String shardId, ShardIteratorType type, String sequenceNumber, Instant timestamp) {
        return kinesis.getShardIterator(r -> r.streamName(stream).shardId(shardId).shardIteratorType(type)
                .startingSequenceNumber(sequenceNumber).timestamp(timestamp)).shardIterator();
    }

    /** GetRecords from {@code iterator} until an answer says the shard's end is reached (no record, 0 behind). */
    private List<Record> readAll(String shardId, String iterator) {
        List<Record> records = new ArrayList<>();
        String next = iterator;
        for (int call = 0; call < 100; call++) {
            String current = next;
            GetRecordsResponse answer = kinesis.getRecords(r -> r.shardIterator(current).limit(3));
            records.addAll(answer.records());
            next = answer.nextShardIterator();
            if (next == null || answer.records().isEmpty() && Long.valueOf(0).equals(answer.millisBehindLatest())) {
                return records;
            }
        }
        throw new Mismatch("GetRecords on " + shardId + " never reached the end of the shard");
    }

    private static List<String> sequenceNumbers(List<Record> records) {
        return records.stream().map(Record::sequenceNumber).toList();
    }

    private void checkShards(List<Shard> listed, List<Shard> described) {
        check(listed.size() == 2, "ListShards: 2 shards");
        check(listed.stream().map(Shard::shardId).toList().equals(described.stream().map(Shard::shardId).toList()),
                "ListShards: the shards DescribeStream names " + listed.stream().map(Shard::shardId).toList());
        BigInteger expectedStart = BigInteger.ZERO;
        for (Shard shard : listed) {
            BigInteger start = new BigInteger(shard.hashKeyRange().startingHashKey());
            BigInteger end = new BigInteger(shard.hashKeyRange().endingHashKey());
            check(start.equals(expectedStart) && end.compareTo(start) > 0,
                    "ListShards: " + shard.shardId() + " hash keys " + start + ".." + end);
            check(shard.sequenceNumberRange() != null && shard.sequenceNumberRange().startingSequenceNumber() != null,
                    "ListShards: " + shard.shardId() + " has a starting sequence number");
            expectedStart = end.add(BigInteger.ONE);
        }
        check(expectedStart.equals(MAX_HASH_KEY.add(BigInteger.ONE)),
                "ListShards: the hash key ranges cover 0..2^128-1");
    }

    /** A shard's records as TRIM_HORIZON read them, against what the puts answered. */
    private void checkRecords(String shardId, List<Record> records, List<Put> puts, Instant notBefore) {
        Map<String, Put> bySequence = new HashMap<>();
        for (Put put : puts) {
            bySequence.put(put.sequenceNumber(), put);
        }
        BigInteger previous = BigInteger.valueOf(-1);
        Set<String> seen = new HashSet<>();
        for (Record record : records) {
            Put put = bySequence.get(record.sequenceNumber());
            check(put != null && put.shardId().equals(shardId),
                    "GetRecords " + shardId + ": " + record.sequenceNumber() + " is a record put to this shard");
            check(put.partitionKey().equals(record.partitionKey()),
                    "GetRecords " + shardId + ": partition key " + record.partitionKey());
            check(Arrays.equals(put.data(), record.data().asByteArray()),
                    "GetRecords " + shardId + ": data " + show(record.data().asByteArray()));
            BigInteger sequence = new BigInteger(record.sequenceNumber());
            check(sequence.compareTo(previous) > 0, "GetRecords " + shardId + ": sequence numbers increase");
            previous = sequence;
            Instant arrival = record.approximateArrivalTimestamp();
            check(arrival != null && !arrival.isBefore(notBefore) && arrival.isBefore(Instant.now().plus(CLOCK_SLACK)),
                    "GetRecords " + shardId + ": ApproximateArrivalTimestamp is now (" + arrival + ")");
            seen.add(record.sequenceNumber());
        }
        long putHere = puts.stream().filter(p -> p.shardId().equals(shardId)).count();
        check(seen.size() == putHere, "GetRecords " + shardId + ": all " + putHere + " records put to it");
    }

    private StreamDescriptionSummary waitForActive() throws InterruptedException {
        return poll(() -> {
            StreamDescriptionSummary summary = kinesis.describeStreamSummary(r -> r.streamName(stream))
                    .streamDescriptionSummary();
            return summary.streamStatus() == StreamStatus.ACTIVE ? summary : null;
        }, "the stream to be ACTIVE");
    }

    private void waitForGone() throws InterruptedException {
        poll(() -> {
            try {
                StreamStatus status = kinesis.describeStreamSummary(r -> r.streamName(stream))
                        .streamDescriptionSummary().streamStatus();
                if (status != StreamStatus.DELETING) {
                    throw new Mismatch("after DeleteStream the stream is " + status);
                }
                return null;
            } catch (ResourceNotFoundException gone) {
                return Boolean.TRUE;
            }
        }, "DeleteStream to remove the stream");
        check(!kinesis.listStreams().streamNames().contains(stream), "DeleteStream: the stream is gone");
    }

    private <T> T poll(Supplier<T> attempt, String what) throws InterruptedException {
        Instant deadline = Instant.now().plus(ACTIVE_WITHIN);
        while (Instant.now().isBefore(deadline)) {
            T result = attempt.get();
            if (result != null) {
                check(true, what);
                return result;
            }
            Thread.sleep(200);
        }
        throw new Mismatch("waited " + ACTIVE_WITHIN + " for " + what);
    }

    private static String argument(String[] args, int index, String variable) {
        String value = args.length > index ? args[index] : System.getenv(variable);
        if (value == null || value.isEmpty()) {
            System.err.println("usage: Main <endpoint> <region> <access key id> <secret access key> <stream>"
                    + " (or " + variable + ")");
            System.exit(2);
        }
        return value;
    }

    public static void main(String[] args) throws InterruptedException {
        Main main = new Main(argument(args, 0, "KINESIS_ENDPOINT"), argument(args, 1, "AWS_REGION"),
                argument(args, 2, "AWS_ACCESS_KEY_ID"), argument(args, 3, "AWS_SECRET_ACCESS_KEY"),
                argument(args, 4, "KINESIS_STREAM"));
        try {
            main.run();
        } catch (Mismatch e) {
            System.out.println("FAIL: " + e.getMessage());
            System.exit(1);
        } catch (RuntimeException e) {
            System.out.println("FAIL: " + e);
            e.printStackTrace();
            System.exit(1);
        } finally {
            main.kinesis.close();
        }
    }
}
