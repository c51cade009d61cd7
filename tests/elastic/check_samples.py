#!/usr/bin/env python3
"""Checks from the sample logs of the elastic examples (--sample-log) that a job relaunched
or reset in place mid-epoch trained on every sample of each epoch once: the batches a launch
(or a round, resetting in place) trained before the point the next resumed from (the
committed samples), then the next one's, cover the epoch's samples with no committed sample
trained again. The only repeats allowed are the padding that evens the split (fewer than the
ranks, per launch).

  check_samples.py LOG_DIR DATASET_SIZE EPOCHS

Each log line: launch epoch processed_before ranks index...
Prints one line per epoch and launch; exits 1 naming the first sample at fault."""

import collections
import glob
import sys


def main():
    log_dir, size, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    # batches[epoch][launch] = [(processed_before, ranks, [indices])]
    batches = collections.defaultdict(lambda: collections.defaultdict(list))
    for path in glob.glob(f"{log_dir}/rank*.log"):
        with open(path) as log:
            for line in log:
                words = line.split()
                launch, epoch, before, ranks = map(int, words[:4])
                batches[epoch][launch].append((before, ranks, [int(w) for w in words[4:]]))
    failed = False
    for epoch in range(1, epochs + 1):
        launches = sorted(batches[epoch])
        if not launches:
            print(f"epoch {epoch}: no batches recorded")
            return 1
        seen = collections.Counter()
        for i, launch in enumerate(launches):
            # Where the next launch resumed this epoch: its first batch's processed count.
            later = launches[i + 1:]
            resumed_at = min(b[0] for b in batches[epoch][later[0]]) if later else None
            kept = [b for b in batches[epoch][launch] if resumed_at is None or b[0] < resumed_at]
            taken = collections.Counter(x for b in kept for x in b[2])
            again = [x for x in taken if x in seen]
            ranks = kept[0][1] if kept else 0
            padding = sum(n - 1 for n in taken.values())
            print(f"epoch {epoch} launch {launch}: {sum(taken.values())} samples on {ranks} "
                  f"ranks{'' if resumed_at is None else f', resumed by the next at {resumed_at}'}"
                  f", {padding} padding repeats")
            if again:
                print(f"FAIL: epoch {epoch}: launch {launch} trained committed samples again, "
                      f"e.g. {sorted(again)[:5]}")
                failed = True
            if padding >= max(ranks, 1):
                print(f"FAIL: epoch {epoch}: launch {launch} repeated {padding} samples")
                failed = True
            seen.update(taken)
        missing = sorted(set(range(size)) - set(seen))
        if missing:
            print(f"FAIL: epoch {epoch}: {len(missing)} samples never trained, e.g. {missing[:5]}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
