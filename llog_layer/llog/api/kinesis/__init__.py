"""The Amazon Kinesis Data Streams API over llog's services (issue 41): its shards, sequence numbers, iterators,
errors and SigV4 verification. A stream is a topic, a shard a partition."""
