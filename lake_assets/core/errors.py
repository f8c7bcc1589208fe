"""One exception root for everything `lake` reports to a user.

Code raises a `LakeError` subclass for a failure it understands; the CLI maps each class
to a one-line message and an exit code in one place (`cli/errors.py`). Anything else is a
bug and keeps its traceback.
"""


class LakeError(Exception):
    """A failure `lake` understands and can explain in one line."""

    exit_code = 1


class UsageError(LakeError):
    """A mistake of the user's: a bad argument, a missing file, an unknown table."""

    exit_code = 2


class StorageUnavailable(LakeError):
    """The object store cannot be reached or refused us."""


class EngineUnavailable(LakeError):
    """The configured engine cannot be started or reached."""


class JobFailed(LakeError):
    """A Spark job the lake started on another service (AWS Glue, EMR Serverless) failed or reported nothing."""


class EmbeddedS3Error(LakeError):
    """The embedded S3 server could not be started."""
