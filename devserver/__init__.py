"""Development tools: ``llog invoke``, ``make dev``'s local servers, the functions under the Lambda emulator.

Never deployed: the server the serve fleet runs is ``server``. None of it ships in the Lambda layer or
the Glue zip.
"""
