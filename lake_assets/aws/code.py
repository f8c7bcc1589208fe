"""What an AWS job runs: the job script and the lake's code, as the orchestrator uploads them.

The code is the installed `lake_assets` package as one zip (pure Python and the YAML it ships),
which Spark puts on the driver's and the executors' `sys.path` (Glue `--extra-py-files`, EMR
Serverless `--py-files`). It is built the same way from the same files every time (sorted entries,
fixed timestamps), so its key carries its content's hash and a release uploads it once. The script
is `job.py` itself, at a fixed key: a Glue job's script location is part of the job's definition.
Third-party packages are not in the zip (`JOB_REQUIREMENTS`: Glue installs them, EMR Serverless
takes them from a packed environment or its image).
"""

import hashlib
import importlib.metadata
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

import lake_assets
from lake_assets.aws import job
from lake_assets.resources.storage import LakeStorage

#: The job script's name under LAKE_AWS_CODE_PREFIX (the Glue job's script location).
SCRIPT_NAME = "lake_apply_job.py"
#: The distributions the job imports beyond what Glue 5 and EMR 7 ship (PySpark, boto3, NumPy,
#: pandas, PyYAML), pinned to the versions the orchestrator runs with.
JOB_REQUIREMENTS = ("dagster-pipes", "deltalake", "pyarrow", "pydantic")
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class UploadedCode:
    """Where the job's script and the lake's code are in the lake's bucket (s3:// URIs)."""

    script: str
    package: str


def requirements() -> list[str]:
    """`JOB_REQUIREMENTS` pinned to the installed versions (for Glue's --additional-python-modules)."""
    return [f"{name}=={importlib.metadata.version(name)}" for name in JOB_REQUIREMENTS]


def package_zip() -> bytes:
    """The `lake_assets` package as a zip, byte for byte the same for the same files."""
    root = Path(lake_assets.__file__).resolve().parent
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            entry = zipfile.ZipInfo(f"{root.name}/{path.relative_to(root).as_posix()}", _FIXED_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, path.read_bytes())
    return buffer.getvalue()


def upload(storage: LakeStorage, prefix: str) -> UploadedCode:
    """Upload the script (every time: it is small) and the code (once per content) under `prefix`."""
    script_key = f"{prefix}{SCRIPT_NAME}"
    storage.put_bytes(script_key, Path(job.__file__).read_bytes())
    data = package_zip()
    package_key = f"{prefix}lake_assets-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not storage.list_objects(package_key):
        storage.put_bytes(package_key, data)
    return UploadedCode(storage.uri(script_key), storage.uri(package_key))
