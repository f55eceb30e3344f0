"""Run SQL on chdb, a current ClickHouse engine embedded in Python, for
the Go tests that check keyheat's DDL and queries against a current
release (the test server is ClickHouse 18.16).

stdin:  {"steps": [{"sql": str, "params": {name: str} | null,
                    "format": str | null}]}
stdout: {"version": str, "results": [{"error": str | null, "out": str}]}

Every step runs in one session on a fresh temporary folder, in order; a
failing step is reported and the next one still runs.
"""

import json
import sys
import tempfile

from chdb import session


def main() -> None:
    req = json.load(sys.stdin)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        s = session.Session(folder)
        try:
            version = str(s.query("SELECT version()", "TSVRaw")).strip()
            for step in req["steps"]:
                kwargs = {}
                if step.get("params"):
                    kwargs["params"] = step["params"]
                try:
                    res = s.query(step["sql"], step.get("format") or "TSVRaw", **kwargs)
                    results.append({"error": None, "out": str(res)})
                except Exception as e:  # chdb raises on a failing query
                    results.append({"error": str(e), "out": ""})
        finally:
            s.close()
    json.dump({"version": version, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
