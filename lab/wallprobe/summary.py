import json, sys
for d in sys.argv[1:]:
    try:
        r = json.load(open(f"{d}/results.json"))
    except Exception as e:
        print(d, "no results", e); continue
    perf = r["extra_data"]["performance"]
    print(f"== {d}")
    for case, c in perf.get("cases", {}).items():
        base = c.get("baseline_overhead_ms")
        bo = {n: round(v.get("overhead_ms", 0), 4) for n, v in c["baselines"].items()}
        print(f"  {case}: base overhead {base:.4f} per-baseline {bo}")
        for n, v in c["impls"].items():
            fp = v.get("first_pass", {})
            print(f"    {n:8s} ev {v['event']['median']:.4f} oh {v.get('overhead_ms',0):.4f} excess {v.get('wall_excess_ms',0):+.4f} "
                  f"first {fp.get('wall_excess_ms', float('nan')):+.4f} retimes {fp.get('retimes',0)} flags {len(v.get('flags',[]))}")
