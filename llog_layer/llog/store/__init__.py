"""The only modules that import ``oxia`` and ``boto3``: the Oxia and S3 stores, their counters, and ``Storage``."""
