"""Oxia's client protocol (``io.oxia.proto.v1``): messages and gRPC stub, generated: do not edit.

Made by scripts/generate-oxia-proto.sh from proto/client.proto of the Go module
github.com/oxia-db/oxia/common@v0.17.1 (h1:PNyzed+CowzI4Nd5CGbzRnQPG22gNqkacUpWS4AU6O4=) with protoc (libprotoc 35.1,
grpcio-tools) and betterproto2_compiler 0.9.0. tests/unit/test_oxia_proto.py
re-generates it and fails if these files differ.
"""
