"""The only modules that import ``oxia`` and ``botocore``: the Oxia and S3 stores, their counters, and ``Storage``."""
