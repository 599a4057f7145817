import csv, collections, sys
rows=list(csv.reader(open(sys.argv[1])))
hdr=rows[1]; data=rows[2:]
ix={h:i for i,h in enumerate(hdr)}
reasons=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
ins=[]
for r in data:
    if len(r)<len(hdr): continue
    try: addr=int(r[0],16)
    except: continue
    ins.append((addr,r[1],int(r[ix['Warp Stall Sampling (All Samples)']] or 0),int(r[ix['Instructions Executed']] or 0),{k:int(r[ix[k]] or 0) for k in reasons}))
alloc=next(a for a,s,*_ in ins if 'TRY_ALLOC' in s); dealloc=next(a for a,s,*_ in ins if 'DEALLOC' in s)
S=sum(i[2] for i in ins)
cons=[i for i in ins if alloc<=i[0]<dealloc]; prod=[i for i in ins if i[0]>=dealloc]
for name,reg in [('consumer',cons),('producer',prod)]:
    s=sum(i[2] for i in reg); ex=sum(i[3] for i in reg)
    c=collections.Counter()
    for i in reg:
        for k,v in i[4].items(): c[k]+=v
    print(f"{name}: samples {s} ({s/S*100:.1f}%), warp instr {ex}; "+', '.join(f"{k[6:]} {v/s*100:.1f}%" for k,v in c.most_common(9) if s))
base=ins[0][0]
n=int(sys.argv[2]) if len(sys.argv)>2 else 30
top=sorted(cons,key=lambda i:-i[2])[:n]
for a,src,s,ex,d in sorted(top):
    rs=', '.join(f"{k[6:]} {v}" for k,v in sorted(d.items(),key=lambda kv:-kv[1])[:3] if v)
    print(f"{a-base:#07x} {s:6d} {s/S*100:4.1f}% ex={ex:8d} {src[:58]:58s} {rs}")
