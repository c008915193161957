"""The log's protocol: every action, the function that performs it, its crash points and what it keeps.

Functions are named relative to ``llog.protocol`` (or in full); crash points
are the strings of the catalogue in ``llog.protocol.faults``; "keeps" names
the invariants below. ``tests/unit/test_protocol_table.py`` checks that every
name here exists.

| #   | action              | function                                     | crash points                | keeps       |
|-----|---------------------|----------------------------------------------|-----------------------------|-------------|
| A1  | initialize          | metadata.PartitionMetadata.create            |                             | I10         |
| A2  | write the WAL blob  | append.LogWriter.append_shared               | writer.after_blob_put       | I4 I8       |
| A3  | append (CAS)        | append_cas.CasCommitter.commit               | writer.after_deadline_check | I1 I2 I4 I7 |
| A4  | reserve             | append_cas.reserve                           | writer.after_reserve        | I1 I2 I7    |
| A5  | materialize         | append_cas.materialize                       | writer.after_index_write    | I4 I6       |
| A6  | clear pending       | append_cas.clear_pending                     |                             | I1 I6       |
|     |                     | append_cas.remove_stale                      |                             |             |
| A7  | recover pending     | append_cas.recover_pending                   | writer.after_index_write    | I7          |
|     |                     | append_cas.finish_pending                    |                             |             |
| A8  | append (sequential) | append_sequential.SequentialAppender.commit  | writer.after_deadline_check | I1 I2 I4 I7 |
|     |                     |                                              | writer.after_sequence_put   |             |
|     |                     | append_sequential.SequentialAppender.commit_many |                         |             |
| A9  | fence               | fence.set_state                              | writer.after_index_write    | I2 I7       |
|     |                     | append_sequential.SequentialAppender.fence   | writer.after_fence_marker   |             |
| A10 | unfence             | fence.set_state                              | writer.after_index_write    | I1 I2       |
|     |                     | append_sequential.SequentialAppender.unfence | writer.after_fence_marker   |             |
| A11 | migrate             | fence.migrate_to_sequential                  | writer.after_index_write    | I1 I2 I7    |
| A12 | compact: recover    | append_cas.recover_pending                   |                             | I7          |
| A13 | compact: resume     | compaction.Compactor._finish                 |                             | I3          |
| A14 | compact: select     | compaction.Compactor._select                 |                             | I5 I6       |
| A15 | compact: write      | compaction.Compactor._rewrite                | compactor.after_blob_put    | I3 I8       |
| A16 | compact: record     | compaction.Compactor.compact_once            | compactor.after_record      | I6 I8       |
|     |                     | metadata.PartitionMetadata.create_compaction |                             |             |
| A17 | compact: end key    | compaction.Compactor._write_end_key          | compactor.after_end_key     | I3          |
| A18 | compact: manifest   | manifest.ManifestStore.publish               | compactor.after_manifest    | I4          |
| A19 | compact: delete old | index.PartitionIndex.delete_entries          | compactor.after_delete      | I1 I3 I6    |
| A20 | compact: cursor     | compaction.Compactor._advance_cursor         | compactor.after_cursor      | I5          |
| A21 | compact: clear      | metadata.PartitionMetadata.delete_compaction |                             | I6          |
| A22 | GC                  | gc.GarbageCollector.collect                  |                             | I8          |
|     |                     | gc.GarbageCollector.collect_wal              |                             |             |
|     |                     | gc.GarbageCollector.collect_compacted        |                             |             |
| A23 | retention           | retention.Retention.enforce                  |                             | I1 I8 I9    |
|     |                     | retention.plan_log_start                     |                             |             |
| A24 | claims              | claims.CompactorClaims.try_claim             |                             |             |
|     |                     | claims.CompactorClaims.held                  |                             |             |
|     |                     | claims.CompactorClaims.release               |                             |             |
| A25 | topic create, grow  | topics.TopicRegistry.create                  |                             | I10 I11     |
|     |                     | topics.TopicRegistry.grow                    |                             |             |
|     |                     | topics.TopicRegistry.add_implicit_partition  |                             | I12         |
| A26 | topic delete        | topics.TopicRegistry.delete                  |                             | I12         |
| A27 | topic reclaim       | topics.reclaim_topic                         | reclaim.after_lease_check   | I8 I13      |
| A28 | consumer groups     | groups.GroupCoordinator.join                 |                             | I14         |
|     |                     | groups.GroupCoordinator.heartbeat            |                             |             |
|     |                     | groups.GroupCoordinator.leave                |                             |             |
|     |                     | groups.GroupCoordinator.commit               |                             |             |
|     |                     | groups.GroupCoordinator.expire_idle          |                             |             |
| A29 | producer ids        | producers.ProducerRegistry.issue             |                             | I15         |
|     |                     | producers.ProducerRegistry.bump              |                             |             |
|     |                     | producers.ProducerRegistry.validate          |                             |             |
| A30 | idempotent append   | producers.IdempotentAppender.append          | producer.after_claim        | I15 I16     |
|     |                     |                                              | producer.after_commit       |             |
| A31 | take over a claim   | producers.take_over                          | writer.after_fence_marker   | I15 I16     |
|     |                     | fence.void_late_commits                      | writer.after_index_write    |             |
|     |                     | append_sequential.SequentialAppender.roll    |                             |             |
|     |                     | producers.find_committed                     |                             |             |
| A32 | compact: claims     | producers.claims_floor                       |                             | I16         |
| A33 | conditional append  | append_cas.CasCommitter.commit               |                             | I1 I4       |
| A34 | verify              | verify.Verifier.verify                       |                             |             |
| A35 | backup              | backup.back_up_topics                        |                             |             |
|     |                     | backup.snapshot_partition                    |                             |             |
| A36 | restore             | backup.restore_backup                        |                             | I10         |
|     |                     | backup.restore_partition                     |                             |             |
| A37 | rebuild             | rebuild.rebuild_topic                        |                             | I4 I5 I10   |
|     |                     | verify.Verifier.verify_partition             |                             |             |
| A38 | namespace guard     | namespace.check_namespace                    |                             | I8          |
|     |                     | namespace.adopt_namespace                    |                             |             |
| A39 | topic configure     | topics.TopicRegistry.configure               |                             | I11         |

Each action, where it is specified and what it does:

* A1 initialize (docs/PROTOCOL.md, "Initialize"): register the partition
  (read its entry; create it if absent; one naming another, reclaimed
  incarnation is replaced by the current record's, ``llog.protocol.registry``),
  then create ``meta/compaction-cursor``, then ``meta/control``, each
  create-only; whoever creates ``meta/control`` fixes the append protocol.
* A2 write the WAL blob (docs/PROTOCOL.md, "Append"): validate and encode
  every group, PUT one ``LLS1`` blob, then commit each partition by the
  protocol its ``meta/control`` names (A3 or A8: each a ``commit.Committer``
  of a ``commit.BatchCommit``). A crash here leaves an object nothing
  references.
* A3 append, CAS protocol (docs/PROTOCOL.md, "Append"): read
  ``meta/control``, recover a pending append (A7), check the commit deadline
  (after every read of ``meta/control``, before every reservation), reserve
  (A4), materialize (A5), clear pending (A6).
* A4 reserve (docs/PROTOCOL.md, "Append"): CAS ``meta/control`` to advance
  ``sequence_counter`` (and with it the high watermark) past the batch and
  record it as ``pending``: the commit point. Refused on a FENCED record and
  after the commit deadline; a lost CAS backs off and retries, an ambiguous
  one is resolved (docs/PROTOCOL.md, "Ambiguous failures"): landed, not
  landed, or ``AppendOutcomeUnknown`` when compaction or retention has removed
  the evidence, never a second reservation of a batch that may have landed.
* A5 materialize (docs/PROTOCOL.md, "Append"): create the index entry at the
  batch's end offset, create-only.
* A6 clear pending (docs/PROTOCOL.md, "Why index entries are only ever
  created, and the stale-key check"): CAS ``meta/control`` to ``pending =
  null``. If someone else finished the append, remove its entry again should
  it sit below a compacted range.
* A7 recover pending (docs/PROTOCOL.md, "Finishing a pending append
  (recovery)"): whoever finds a ``pending`` (a writer, a fence, the
  compactor) performs A5-A6 for it.
* A8 append, sequential protocol (docs/SEQUENTIAL_APPEND.md, "4. Append"):
  one sequential put of the index entry assigns the offsets and commits (the
  commit deadline is checked before every put); a key past a fence marker is
  void and the append is ``LogFenced``, past a roll's marker (A31) it
  re-targets to the generation the roll opened. A shared append
  to several sequential partitions sends their puts in one Oxia write request
  per shard (``commit_many``); each put is still its own partition's commit.
* A9 fence (docs/PROTOCOL.md, "Fence and unfence"; docs/SEQUENTIAL_APPEND.md,
  "5. Fence and unfence"): CAS partition: finish a pending append, then CAS
  ``log_state = FENCED``. Sequential: put a fence marker, then seal the
  generation in ``meta/control``. A topic's delete also marks the record
  ``topic_deleted`` (same CAS or seal) until the record in force has both.
* A10 unfence (the same sections): CAS ``log_state = OPEN``; a sequential
  partition gets a new generation starting where the sealed one ended. A
  record marked ``topic_deleted`` is refused (``UnknownTopic``), checked on
  every read of it.
* A11 migrate (docs/SEQUENTIAL_APPEND.md, "9. Migration from the CAS
  protocol"): finish a pending append, then CAS ``meta/control`` to the
  sequential protocol; the CAS index becomes generation 0. One way.
* A12-A21 compaction (docs/PROTOCOL.md, "Compaction", steps 1-8): finish a
  pending append; resume a recorded compaction from the state it names;
  select WAL entries from the cursor; PUT the compacted object; create
  ``meta/compaction`` create-only (only while the cursor still equals the
  range's start, before the commit deadline); CAS the end key to one
  COMPACTED entry (the commit point); publish the manifest; delete the lower
  keys; advance the cursor; delete ``meta/compaction``.
* A22 GC (docs/GC.md, "The safety argument"): delete WAL blobs and compacted
  objects older than the grace period that nothing references.
* A23 retention (docs/RETENTION.md, "Truncation"): CAS the log start forward
  past whole compacted ranges below the cursor (the commit point), then
  publish it next to the manifests and delete the index keys and objects
  below it.
* A24 claims (docs/PROTOCOL.md, "Compaction"): an ephemeral
  ``meta/compactor-claim`` per partition. It only avoids wasted work: no
  invariant rests on it.
* A25-A27 topics (``llog.protocol.topics``, docs/HTTP_API.md "Topics"): a
  create-only (create) or compare-and-set (grow, delete) topic record, then
  the partitions it names are initialized (create, grow) or fenced (delete);
  an implicit topic's record is created by its first produce and every new
  partition is added to it (compare-and-set) before it is initialized;
  each is idempotent, so a crash is finished by repeating it. Reclaim deletes
  a deleted topic's Oxia keys, objects and registry entries, the record last,
  under a claim on the record (compare-and-set) that keeps overlapping GC runs apart;
  a repeated delete fences under the same claim, so no reclaim runs while it does.
  That module's docstring argues I11-I13 (its T1-T4).
* A28 consumer groups (``llog.protocol.groups``, docs/GROUPS.md): read the
  group's one record, drop expired leases, apply, write it back with a
  compare-and-set on the version read; a refused action writes nothing
  (I14, argued in that module's docstring).
* A29 producer ids (docs/IDEMPOTENCE.md, "Producer ids"): create-only a
  new id at epoch 0; CAS its epoch up (fencing older epochs); check a
  request's epoch against it, marking the id used.
* A30 idempotent append (docs/IDEMPOTENCE.md, "The append"): after the WAL
  blob's PUT, read the partition's producer state (dedupe, fence, order),
  CAS a claim on the batch, commit it with its producer tag by the
  partition's protocol (A3 or A8), CAS the claim into the remembered batches.
* A31 take over a claim (docs/IDEMPOTENCE.md, "Takeover"): once a claim's
  commit deadline and margin have passed, void the commit request its
  attempt may still send late (a process paused between its deadline check
  and its send, ``writer.after_deadline_check``): on a CAS partition finish a
  pending append and compare-and-set ``meta/control`` onto itself, so a
  reservation on an older version fails; on a sequential one roll the open
  generation (a roll marker, then one CAS sealing it and opening the next,
  docs/SEQUENTIAL_APPEND.md "Roll"), so a put lands void and its writer
  re-targets only after checking its deadline again. Then look for its tag
  from its search offset on and record what was found.
* A32 compact: claims (docs/IDEMPOTENCE.md, "Compaction"): after selecting
  its run, the compactor takes over expired claims and stops its run before
  the search offset of any other.
* A33 conditional append (docs/IDEMPOTENCE.md, "Conditional append"): a CAS
  reservation is made only if its start offset is the ``expected_offset``;
  sequential partitions refuse it before the blob's PUT.
* A34 verify (docs/RECOVERY.md, "Verify a partition"): read a partition's
  cursor, ``meta/control``, index, manifests and objects, and report what
  breaks I1, I3, I4, I5, I6 or I9 (gaps, overlaps, stale keys, missing,
  short or corrupt objects, a broken manifest chain, a cursor or log start
  out of bounds). Writes nothing, so it keeps no invariant; what a concurrent
  writer changes between its reads is confirmed by fresh reads before it is
  reported.
* A35 backup (docs/RECOVERY.md, "Back up and restore"): per partition read
  ``meta/``, the high watermark, every other key, ``meta/`` again (again
  while compaction, retention or a fence moved it), keep what ends at or
  below that high watermark, PUT it under ``__catalog/backups/{id}/``; groups
  before the partitions, producer ids after; ``backup.json`` last. Writes no
  Oxia key; GC never lists the backups' folder (I8 is untouched).
* A36 restore (docs/RECOVERY.md, "Back up and restore"): refuse if a restored topic has any key;
  per partition the registry entry, the other keys, ``meta/control`` last;
  the topic record after its partitions (create-only: one written meanwhile
  fails the restore), then each partition registered again (an entry replaced
  while the record was missing names the restored folder again); groups and
  producer ids create-only.
  A crash leaves partitions not initialized, which a new restore refuses
  (delete them, or use an empty namespace).
* A37 rebuild (docs/RECOVERY.md, "Rebuild from S3"): from the manifest
  chain, the newest backup and the objects that still exist, write the
  entries S3 proves (committed data only: I4), then the cursor and
  ``meta/control`` so that new offsets start above every offset any
  surviving object may hold; the lost range is one LOST entry (no data: a
  read there is ``RecordsLost``), below the cursor (I5), reported per
  partition. Refuses a topic with any Oxia key. The topic record comes
  after the partitions, then each is registered again (as restore does). A
  crash before ``meta/control`` leaves partitions not initialized; delete
  their keys and run it again.
* A38 namespace guard (docs/GC.md, "The namespace guard"): before a GC run
  deletes anything, read the namespace identity from Oxia and from S3;
  create it where both lack it (Oxia create-only first, then S3), copy Oxia's
  to S3 where only S3 lacks it, and refuse the run (``NamespaceMismatch``,
  nothing deleted) when S3's has no equal in Oxia: Oxia's state was lost, and
  every blob would look unreferenced (I8). ``adopt_namespace`` copies S3's
  identity into Oxia, create-only, after every topic is rebuilt or restored.
* A39 topic configure (``llog.protocol.topics``, docs/KINESIS.md "Operations"): a compare-and-set of the
  topic record with its retention limits or tags changed, on the version read; a concurrent grow, delete or
  reclaim claim makes it read again. One write, so a crash leaves it done or not.

Invariants (docs/SEQUENTIAL_APPEND.md, "10. Safety", argues them for both protocols):

* I1 Offsets are monotonic and contiguous: each commit takes the offsets
  right after the previous one's, no offset is assigned twice or skipped, and
  the counter never moves back (nothing deletes a partition's last entry or a
  sequence's highest key).
* I2 A fenced log rejects appends: from the moment ``fence`` returns until an
  unfence, no append commits (a reservation needs the record it read, OPEN; a
  sequential put past the marker is void forever).
* I3 Compaction preserves data: the same records at the same offsets, at
  every step (the end key covers the whole range before any lower key goes).
* I4 No phantom entries: every index entry (and ``pending``, and manifest)
  points at bytes that exist, written by an append that reached its commit
  point (acknowledged, or reported ``AppendOutcomeUnknown``) or by a committed
  compaction; a rejected append is never readable. (A rebuild's LOST entry
  points at nothing and reads as ``RecordsLost``.)
* I5 Cursor <= next offset: the compaction cursor only moves forward, and
  never past the high watermark + 1.
* I6 No overlapping index ranges: the append path only creates keys, one
  compaction is recorded at a time, a stale key a stalled writer re-creates
  below a compacted range is removed again, and a compaction's end key
  overlaps its lower keys only while in flight, with the same records (I3).
  docs/PROTOCOL.md names the one residual case (a party that re-creates a
  stale key and dies before its check): that key is never read for a
  compacted offset it does not hold, nor needed once its blob is gone (the
  compacted range over it is read instead), and retention removes it with
  that range.
* I7 An acknowledged append stays readable at its offsets: through ``pending``
  until materialized, and across fence, migration and compaction; only
  retention removes it, below the log start.
* I8 GC and retention never delete a referenced object: nothing makes a first
  reference to an object later than the commit deadline after its PUT began,
  GC deletes only unreferenced objects older than the grace period (which
  exceeds it), and retention deletes only the objects of ranges below a log
  start it has already moved. None of them deletes outside its own root's
  prefixes, whatever an entry names (a copy restored into another root names
  the original's objects).
* I9 The log start only moves forward, only past whole compacted ranges below
  the compaction cursor and any running compaction.
* I10 Every initialized partition is registered: the registry record is
  written before ``meta/control``.
* I11 A topic's partition count only grows, and its name is claimed
  create-only: two creates of one name agree, or one gets ``TopicExists``.
  A configure (retention, tags) is a compare-and-set that changes neither the
  count, the id nor the state: it never undoes a grow or a delete.
* I12 After a topic's delete returns, no append to it succeeds: every
  partition is fenced first, and a partition is in its topic's record before
  it is initialized (explicit: below the count; implicit: added by
  compare-and-set), so a delete fences it or the addition is refused. The
  delete's fence marks each partition's ``meta/control`` as a deleted
  topic's, which no unfence reopens (one that raced the delete is fenced
  again by it, or refused).
* I13 Reclaim touches only the deleted topic's own keys and objects: a topic
  created from the version with topic ids keeps its partitions in folders named
  by its id (``llog.format.keys``), and registry entries are removed only if
  they name that id, so no run (however late, paused or taken over) reaches a
  topic created again under the same name; one run at a time per topic, by its
  claim on the deleted record, is an efficiency measure. Nothing writes to a
  reclaimed partition of a newer incarnation: keys are resolved from the
  topic's current record (``topics.TopicLayouts``), and a holder of an old
  incarnation's keys reaches only the old folder.
* I14 A consumer group's members hold disjoint partitions covering what they
  subscribe to, its generation only grows, and an offset is committed only by
  the partition's owner in the current generation, checked on the version of
  the group record the commit replaces.
* I15 An idempotent producer's batch commits at most once per partition and
  epoch: every commit happens under the batch's claim, and a claim is taken
  over only after its attempt's deadline and margin, and only after the
  takeover made every commit request the attempt may still send fail or be
  void (docs/IDEMPOTENCE.md, "Safety"). A duplicate answer (the remembered
  batch's offsets) goes only to a batch with the same sequence range and
  records digest: another batch under that range is refused.
* I16 A committed batch's tag stays findable while its claim is unresolved: it
  lies at or after the claim's search offset, below which compaction (the
  only step that drops tags) stops.
"""
