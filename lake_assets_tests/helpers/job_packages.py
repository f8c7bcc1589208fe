"""Which installed distributions an AWS job may import: what Glue 5 and EMR 7 ship, the packages the
lake gives the job (lake_assets/aws/code.py `JOB_REQUIREMENTS`), and what those require."""

import importlib.metadata as metadata
from collections.abc import Iterable

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

#: What the platforms' images have (AWS's Glue 5.0 and EMR 7 release notes: PySpark 3.5, boto3, NumPy, pandas,
#: PyYAML). PySpark's `connect` extra: the fake runs the job on Spark Connect (helpers/aws_fake.py), the
#: platforms on their JVM.
PLATFORM = ("pyspark[connect]", "boto3", "numpy", "pandas", "pyyaml")
#: Imported when present, not required: botocore takes certifi's CA bundle if installed (its own otherwise);
#: grpc (the fake's Spark Connect client) its health-checking add-on.
OPTIONAL = {"certifi", "grpcio-health-checking"}


def allowed_distributions(roots: Iterable[str]) -> set[str]:
    """`roots` (requirement strings, extras included) and every distribution they require, installed ones."""
    allowed: set[str] = set()
    pending = [Requirement(root) for root in roots]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in allowed:
            continue
        allowed.add(name)
        for raw in metadata.requires(requirement.name) or []:
            needed = Requirement(raw)
            if needed.marker is None or any(needed.marker.evaluate({"extra": extra})
                                            for extra in {"", *requirement.extras}):
                pending.append(needed)
    return allowed


def unprovided(modules: Iterable[str], allowed: set[str]) -> set[str]:
    """Those of `modules` (top-level names) that come from installed distributions none of which is in
    `allowed` (a module several distributions install into, like `grpc`, needs one of them)."""
    providers = metadata.packages_distributions()
    return {module for module in modules if providers.get(module)
            and not {canonicalize_name(dist) for dist in providers[module]} & (allowed | OPTIONAL)}
