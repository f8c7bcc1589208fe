"""IAM policies (deploy/aws/) read as the actions they allow, and boto3 calls named as IAM actions."""

import json
from pathlib import Path

POLICIES = Path(__file__).resolve().parents[2] / "deploy" / "aws"
#: S3 operations whose IAM action has another name (AWS's "Amazon S3 actions" reference); every other
#: operation of every service is its own action (Glue, EMR Serverless: StartJobRun is glue:StartJobRun).
S3_ACTIONS = {"ListObjectsV2": "ListBucket", "ListObjects": "ListBucket", "HeadBucket": "ListBucket",
              "HeadObject": "GetObject", "DeleteObjects": "DeleteObject"}


def allowed_actions(name: str) -> set[str]:
    """The actions `deploy/aws/<name>` allows (no wildcards: the policies name each action)."""
    actions: set[str] = set()
    for statement in json.loads((POLICIES / name).read_text())["Statement"]:
        assert statement["Effect"] == "Allow", statement
        action = statement["Action"]
        actions.update([action] if isinstance(action, str) else action)
    return actions


def iam_action(call: str) -> str:
    """`service:Operation` as botocore names a call -> the IAM action it needs."""
    service, operation = call.split(":", 1)
    return f"s3:{S3_ACTIONS.get(operation, operation)}" if service == "s3" else call
