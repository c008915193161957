"""``GET /health``, ``GET /topics``, partition status, fence and unfence."""
