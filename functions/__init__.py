"""Lambda functions of llog (API Gateway REST proxy handlers) and their shared code.

Deployment: each function is packaged with this package's ``__init__.py``, the
shared ``functions/common`` package and its own directory, keeping the
``functions.`` prefix, so the handler is ``functions.produce.app.handler``
(likewise ``consume``, ``admin``). The ``llog`` library comes from the layer.
``llog serve`` runs the same handlers in one process.
"""
