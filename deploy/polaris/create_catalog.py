"""Create the lake's Iceberg catalog in Apache Polaris, once (docker-compose.yml's `polaris-init`).

Polaris's management API (spec/polaris-management-service.yml, Polaris 1.7): a token for the
root principal (OAuth2 client credentials, scope PRINCIPAL_ROLE:ALL), then an INTERNAL catalog
named POLARIS_CATALOG whose files live in s3://POLARIS_CATALOG/ on the S3 endpoint (MinIO:
path-style, no STS, so Polaris vends no credentials and every engine uses its own key pair),
then CATALOG_MANAGE_CONTENT for the catalog_admin role (granted to the root's service_admin)
so the lake can create and commit tables. Re-running is harmless: an existing catalog (409)
is kept, the grant is idempotent. Standard library only: it runs in the lake's image.
"""

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

POLARIS = os.environ.get("POLARIS_URL", "http://polaris:8181")
CATALOG = os.environ["POLARIS_CATALOG"]
S3_ENDPOINT = os.environ["LAKE_S3_ENDPOINT"]
REGION = os.environ.get("LAKE_S3_REGION", "us-east-1")


def call(method: str, path: str, token: str, body: dict | None = None) -> int:
    request = urllib.request.Request(f"{POLARIS}{path}", method=method, data=json.dumps(body).encode() if body else None,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        if error.code == 409:  # the catalog exists
            return error.code
        sys.exit(f"{method} {path}: HTTP {error.code} {error.read().decode(errors='replace')[:500]}")


def main() -> None:
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "scope": "PRINCIPAL_ROLE:ALL",
                                   "client_id": os.environ["AWS_ACCESS_KEY_ID"],
                                   "client_secret": os.environ["AWS_SECRET_ACCESS_KEY"]}).encode()
    with urllib.request.urlopen(f"{POLARIS}/api/catalog/v1/oauth/tokens", data=form, timeout=30) as response:
        token = json.load(response)["access_token"]
    location = f"s3://{CATALOG}/"
    catalog = {"catalog": {
        "name": CATALOG, "type": "INTERNAL", "properties": {"default-base-location": location},
        "storageConfigInfo": {"storageType": "S3", "allowedLocations": [location], "endpoint": S3_ENDPOINT,
                              "pathStyleAccess": True, "stsUnavailable": True, "region": REGION},
    }}
    created = call("POST", "/api/management/v1/catalogs", token, catalog)
    print(f"catalog {CATALOG}: {'exists' if created == 409 else 'created'} ({location} on {S3_ENDPOINT})")
    call("PUT", f"/api/management/v1/catalogs/{CATALOG}/catalog-roles/catalog_admin/grants", token,
         {"grant": {"type": "catalog", "privilege": "CATALOG_MANAGE_CONTENT"}})
    print(f"catalog {CATALOG}: catalog_admin may manage its content")


if __name__ == "__main__":
    main()
