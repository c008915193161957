"""The stored documents: one module per kind of key, each with its key layout and its value's typed
definition side by side (the key schema as a whole: ``llog.format.keys``).

* ``control``: ``{base}/meta/control``, ``ControlRecord`` (with ``PendingAppend`` and ``Generation``).
* ``index``: ``{base}/index/{end}`` and the sequence keys ``{base}/seq/{g}/e-{position}-{fences}``,
  ``IndexEntry`` and ``FenceMarker``.
* ``compaction``: ``{base}/meta/compaction-cursor``, ``{base}/meta/compaction`` and, in S3, the manifests
  ``{base}/manifests/{start}-{end}.json``: ``CompactionCursor``, ``CompactionRecord``, ``CompactedRange``.
* ``producers``: ``{base}/producers/{id}`` and ``{root}/__catalog/producers/{id}`` (``ProducerKeys``),
  ``ProducerState`` and ``ProducerRecord``.
* ``namespace``: ``{root}/__catalog/namespace`` and its S3 copy (``NamespaceKeys``), ``NamespaceRecord``.
* ``groups``: ``{root}/__catalog/groups/{group}`` (``GroupKeys``), ``GroupDocument``.
* ``access_keys``: ``{root}/__catalog/access-keys/{id}`` and ``{root}/__catalog/kinesis-iterator-key``
  (``AccessKeyKeys``), ``AccessKeyRecord`` and ``IteratorKeyRecord``: the Kinesis API's access keys.
* ``document``: what they share: the encoder, strict decoding, ``TimeSpan`` and ``DataRef``.
"""
