"""Time from pressing Run in the cramming app (02) to its first accessibility point.

The app with its defaults (default embedded model, natural text, m = 1, 2, the default length
search, fast protocol) and a fresh results store, as a new user gets it. Prints the seconds
to the first finished string, to the first point on the curve (a length with all its strings
done), and to the first fitted n50. Goal: the first point within one minute on a
2-core CPU.

    .venv/bin/python benchmarks/cramming_app_first_point.py
"""
import tempfile
import time

from accesslib.apps.nb02_cramming import CrammingApp
from accesslib.results.store import ResultsStore


def main():
    with tempfile.TemporaryDirectory() as tmp:
        app = CrammingApp(store=ResultsStore(f"{tmp}/r.sqlite"), canvas="agg", fast=False)
        print(f"model {app.model.value}, m {app.ms.value}, {app.samples.value} strings/length, "
              f"max_steps {app.max_steps.value}, protocol {app.protocol.value}")
        t0 = time.perf_counter()
        app.start()
        first_string = first_point = first_n50 = None
        while app.is_running and first_n50 is None:
            time.sleep(0.2)
            now = time.perf_counter() - t0
            if first_string is None and app.rows:
                first_string = now
            if first_point is None and any(c["lengths"] for c in app.curves.values()):
                first_point = now
            if first_n50 is None and any(c["n50"] == c["n50"] for c in app.curves.values()):
                first_n50 = now
        app.stop()
        app.wait(600)
        fmt = lambda t: "-" if t is None else f"{t:.1f} s"  # noqa: E731
        print(f"first string {fmt(first_string)}, first curve point {fmt(first_point)}, "
              f"first n50 {fmt(first_n50)}; {len(app.rows)} strings before Stop")


if __name__ == "__main__":
    main()
