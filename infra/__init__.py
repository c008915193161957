"""The llog AWS CDK app: one construct per concern, composed by :class:`infra.stack.LlogStack`.

See docs/DEPLOY.md for the settings (CDK context), the design decisions and how to deploy.
"""
