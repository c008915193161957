"""Kinesis's error answers: ``__type``, HTTP status and body for every error type."""

from __future__ import annotations

import pytest

from llog.api.kinesis import errors
from llog.api.kinesis.errors import KinesisError

STATUSES = {
    "ResourceNotFoundException": 400,
    "ResourceInUseException": 400,
    "InvalidArgumentException": 400,
    "ExpiredIteratorException": 400,
    "ExpiredNextTokenException": 400,
    "LimitExceededException": 400,
    "ProvisionedThroughputExceededException": 400,
    "ValidationException": 400,
    "AccessDeniedException": 400,
    "UnknownOperationException": 400,
    "IncompleteSignatureException": 400,
    "InvalidSignatureException": 400,
    "UnrecognizedClientException": 400,
    "MissingAuthenticationTokenException": 403,
    "SerializationException": 400,
    "InternalFailure": 500,
    "ServiceUnavailable": 503,
}


def _error_types() -> list[type[KinesisError]]:
    return [
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, KinesisError) and value is not KinesisError
    ]


def test_every_error_type_is_listed_with_its_status() -> None:
    assert {error.type_name: error.status for error in _error_types()} == STATUSES


@pytest.mark.parametrize("type_name", sorted(STATUSES))
def test_the_body_is_type_and_message(type_name: str) -> None:
    error = getattr(errors, type_name)("Stream orders under account 0 not found.")
    assert error.body() == {"__type": type_name, "message": "Stream orders under account 0 not found."}
    assert str(error) == error.message
    assert error.status == STATUSES[type_name]


def test_only_throughput_and_unavailability_are_retriable() -> None:
    assert {error.type_name for error in _error_types() if error.retriable} == {
        "ProvisionedThroughputExceededException",
        "ServiceUnavailable",
    }


def test_the_service_model_names_every_modelled_error_we_answer() -> None:
    import botocore.session

    model = botocore.session.get_session().get_service_model("kinesis")
    modelled = {shape for shape in model.shape_names if model.shape_for(shape).metadata.get("exception")}
    ours = set(STATUSES) - {
        "UnknownOperationException",
        "SerializationException",  # common to the JSON protocols, not in a service model
        "IncompleteSignatureException",
        "InvalidSignatureException",
        "UnrecognizedClientException",
        "MissingAuthenticationTokenException",
        "InternalFailure",
        "ServiceUnavailable",
    }
    assert ours <= modelled
