"""What is stored, with no I/O: key layout, record batches, WAL objects and Oxia documents.

Everything the Glue export job needs comes from here (and ``llog.store.s3``)."""
