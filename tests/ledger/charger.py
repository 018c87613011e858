"""A charging process for the stress and kill tests: ``python charger.py LOCATION WORKER COUNT SIGMA``.

Charges COUNT releases ``w<WORKER>-<i>`` (a Gaussian with noise multiplier SIGMA each) and prints one line per
outcome *after* the ledger returned it: ``ACCEPTED name`` (committed), ``REFUSED name`` (nothing written). A line
printed is a charge that reported its outcome; a process killed before printing may or may not have committed.
"""

from __future__ import annotations

import sys


def main() -> None:
    import dplens
    from dplens.ledger import Ledger

    location, worker, count, sigma = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    event = dplens.Gaussian(noise_multiplier=sigma)
    print("READY", flush=True)
    with Ledger.open(location, timeout=120) as ledger:
        for i in range(count):
            name = f"w{worker}-{i}"
            result = ledger.charge(event, release=name, charged_by=f"worker-{worker}")
            print(("ACCEPTED " if result.accepted else "REFUSED ") + name, flush=True)


if __name__ == "__main__":
    main()
