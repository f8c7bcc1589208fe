import time, glob
from lake_assets_tests.conftest import DATA
from lake_assets.insurance.pipeline import apply_pending
from lake_assets.delta import open_table, to_arrow
from lake_assets.tables import INSURANCE, INSURANCE_QUARANTINE
from lake_assets.ledger import Ledger

def test_explore(storage, spark):
    storage.put_bytes("raw/fullload/full-load.csv", (DATA / "fullload/full-load.csv").read_bytes())
    t = time.perf_counter(); r = apply_pending(storage, spark, "r1"); print("t1", time.perf_counter() - t, r)
    for p in sorted((DATA / "cdcload").glob("*.csv")):
        storage.put_bytes(f"raw/cdcload/{p.name}", p.read_bytes())
    t = time.perf_counter(); r = apply_pending(storage, spark, "r2"); print("t2", time.perf_counter() - t, r)
    t = time.perf_counter(); r = apply_pending(storage, spark, "r3"); print("t3", time.perf_counter() - t, r)
    print(to_arrow(open_table(storage, INSURANCE_QUARANTINE)).to_pylist())
    import duckdb, pathlib
    ext = next(pathlib.Path(__import__("duckdb_extension_delta").__path__[0]).rglob("*.duckdb_extension"))
    con = duckdb.connect()
    con.execute(f"LOAD '{ext}'")
    con.execute("LOAD '/tmp/httpfs/duckdb_extension_httpfs/extensions/v1.5.5/httpfs.duckdb_extension'")
    o = storage.delta_storage_options()
    host = o["AWS_ENDPOINT_URL"].split("://")[1]
    con.execute(f"CREATE SECRET (TYPE s3, KEY_ID '{o['AWS_ACCESS_KEY_ID']}', SECRET '{o['AWS_SECRET_ACCESS_KEY']}', ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')")
    t = time.perf_counter()
    print(con.execute(f"SELECT * FROM delta_scan('{INSURANCE.uri(storage)}') ORDER BY policy_id").fetchall()[:3], time.perf_counter() - t)
