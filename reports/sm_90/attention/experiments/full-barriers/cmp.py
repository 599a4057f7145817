import csv, sys, glob, os, statistics
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, '*.csv'))):
    tag = os.path.basename(f)[:-4]
    for r in csv.DictReader(open(f)):
        key = (r['seq'], r['head_dim'], r['causal'])
        rows.setdefault(key, {})[(tag, r['impl'])] = float(r['tflops'])
ORDER = ['base2', 'new', 's4', 'dflt', 'nopp', 'c2', 'c3', 's3', 's2', 'tf0', 'tf2', 'nostore', 'old', 'head', 'base']
tags = sorted({t.rsplit('-', 1)[0] for v in rows.values() for (t, i) in v if t != 'sdpa'}, key=lambda t: ORDER.index(t) if t in ORDER else 99)
print(f"{'S':>6} {'d':>4} {'causal':>6} {'impl':<20} " + ' '.join(f"{t:>13}" for t in tags) + '  ' + ' '.join(f"{t+'/old':>8}" for t in tags[1:]) + '  ' + ' '.join(f"{t+'/fl':>7}" for t in tags))
for key in sorted(rows, key=lambda k: (int(k[1]), k[2], int(k[0]))):
    v = rows[key]
    flash = v.get(('sdpa', 'sdpa-flash-bf16'))
    impls = sorted({i for (t, i) in v if t != 'sdpa'})
    for i in impls:
        m = {}
        for t in tags:
            xs = [v.get((f'{t}-{n}', i)) for n in (1, 2)]
            m[t] = xs if None not in xs else None
        if any(x is None for x in m.values()): continue
        mean = {t: statistics.mean(m[t]) for t in tags}
        line = f"{key[0]:>6} {key[1]:>4} {key[2]:>6} {i:<20} " + ' '.join(f"{m[t][0]:6.1f},{m[t][1]:6.1f}" for t in tags)
        line += '  ' + ' '.join(f"{mean[t]/mean[tags[0]]:8.3f}" for t in tags[1:])
        if flash: line += '  ' + ' '.join(f"{mean[t]/flash:7.3f}" for t in tags)
        print(line)
    if flash: print(f"{key[0]:>6} {key[1]:>4} {key[2]:>6} {'sdpa-flash-bf16':<22} {flash:7.1f}")
