"""The commit protocol's file operations on Hadoop's FileSystem, through Spark's JVM.

Using the file system Spark itself writes with means one code path for a local
folder (``file:``), S3 on Glue (``s3:``, EMRFS) and ``s3a:``; no second S3 client
has to agree with Spark about credentials, endpoints or consistency. The one
exception is ``create_new``: Hadoop has no atomic create-only write, so on S3 it
is llog's client's conditional PUT.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pyspark.sql import SparkSession

from llog.config import S3Config
from llog.errors import ConfigurationError
from llog.format.keys import S3Location
from llog.store.s3 import BlobStore

S3_SCHEMES = ("s3", "s3a", "s3n")


class HadoopFileSystem:
    def __init__(self, spark: SparkSession, root_uri: str, s3: S3Config | None = None) -> None:
        self._s3 = s3 or S3Config()
        self._blobs: BlobStore | None = None  # for create_new on S3, made at first use
        jvm: Any = spark._jvm
        self._path_class = jvm.org.apache.hadoop.fs.Path
        self._io_utils = jvm.org.apache.commons.io.IOUtils
        self._fs = self._path(root_uri).getFileSystem(spark._jsc.hadoopConfiguration())

    def _path(self, uri: str) -> Any:
        return self._path_class(uri)

    def list_files(self, uri: str) -> list[str]:
        """Every file below ``uri``, recursively."""
        found = []
        files = self._fs.listFiles(self._path(uri), True)
        while files.hasNext():
            found.append(str(files.next().getPath().toString()))
        return found

    def exists(self, uri: str) -> bool:
        return bool(self._fs.exists(self._path(uri)))

    def read_bytes(self, uri: str) -> bytes:
        stream = self._fs.open(self._path(uri))
        try:
            return bytes(self._io_utils.toByteArray(stream))
        finally:
            stream.close()

    def create(self, uri: str, data: bytes) -> None:
        stream = self._fs.create(self._path(uri), False)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def create_new(self, uri: str, data: bytes) -> bool:
        """Create ``uri`` holding ``data`` unless it exists; of two callers at once exactly one gets True.

        Hadoop's ``create(overwrite=false)`` checks, then creates: not atomic, on local disks or on S3.
        So: S3 with a conditional PUT (``If-None-Match: *``, with ``s3`` the job's S3 settings), a local
        folder with a hard link of a whole temporary file (a link fails if the name exists).
        """
        parts = urlsplit(uri)  # qualified, as every path of the export is (``qualify``)
        if parts.scheme in S3_SCHEMES:
            location = S3Location(parts.netloc, unquote(parts.path).lstrip("/"))
            self._blobs = self._blobs or BlobStore(self._s3)
            return self._blobs.put_if_absent(location, data)
        if parts.scheme != "file":
            raise ConfigurationError(f"no create-only write for {uri}: the export's run lease needs S3 or a folder")
        path = Path(unquote(parts.path))
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".tmp-{uuid.uuid4().hex}")
        temporary.write_bytes(data)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        finally:
            temporary.unlink()
        return True

    def rename(self, source: str, target: str) -> bool:
        target_path = self._path(target)
        self._fs.mkdirs(target_path.getParent())
        return bool(self._fs.rename(self._path(source), target_path))

    def delete(self, uri: str) -> None:
        self._fs.delete(self._path(uri), True)

    def qualify(self, uri: str) -> str:
        """``uri`` with scheme and authority, as Spark and the listings spell it."""
        return str(self._fs.makeQualified(self._path(uri)).toString())
