# The image of the llog serve fleet (llog:frontDoor=serve, infra/serve_fleet.py): `llog serve`, the
# HTTP API of one process, as `make dev` runs it, for ECS Fargate on ARM64. `cdk deploy` builds it
# from the repository root, with only the paths of serve_fleet.IMAGE_CONTEXT in the build context.
FROM public.ecr.aws/docker/library/python:3.13-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/opt/llog/llog_layer:/opt/llog/client:/opt/llog
WORKDIR /opt/llog

COPY infra/layer-requirements.txt infra/serve-requirements.txt infra/
RUN pip install --no-cache-dir --no-deps --only-binary=:all: --disable-pip-version-check \
        -r infra/serve-requirements.txt

COPY llog_layer/llog llog_layer/llog
COPY client/llog_client client/llog_client
COPY functions functions
COPY server server

# No root in the container; the process needs no file system writes.
USER 1000:1000
EXPOSE 8080
# SIGTERM (ECS stopping the task) drains: no new requests, in-flight ones finish, the batcher flushes.
STOPSIGNAL SIGTERM
CMD ["python", "-m", "server.serve", "--host", "0.0.0.0", "--port", "8080"]
