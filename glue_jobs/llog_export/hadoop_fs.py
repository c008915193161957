"""The commit protocol's file operations on Hadoop's FileSystem, through Spark's JVM.

Using the file system Spark itself writes with means one code path for a local
folder (``file:``), S3 on Glue (``s3:``, EMRFS) and ``s3a:``; no second S3 client
has to agree with Spark about credentials, endpoints or consistency.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


class HadoopFileSystem:
    def __init__(self, spark: SparkSession, root_uri: str) -> None:
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

    def rename(self, source: str, target: str) -> bool:
        target_path = self._path(target)
        self._fs.mkdirs(target_path.getParent())
        return bool(self._fs.rename(self._path(source), target_path))

    def delete(self, uri: str) -> None:
        self._fs.delete(self._path(uri), True)

    def qualify(self, uri: str) -> str:
        """``uri`` with scheme and authority, as Spark and the listings spell it."""
        return str(self._fs.makeQualified(self._path(uri)).toString())
