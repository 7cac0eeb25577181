/*
 * geoquota.pml: a Promela model of DESIGN §3-4 (leases, loans, lazy split
 * refill, process leases pinned to share, recovery after state loss, policy
 * changes) for one key of a token bucket, checked exhaustively by Spin.
 * model/README.md maps every step below to the Lua script and TypeScript
 * function it abstracts, lists the runs, and says what the model leaves out.
 *
 * Units. Share: integers out of U. Tokens are counted in 1/U of a token
 * ("units"), so region i's capacity C*s_i/U tokens is exactly C*s_i units
 * and its refill r*s_i/U tokens per tick is r*s_i units per tick.
 *
 * Time. Discrete ticks of real time. There is no absolute clock and no
 * horizon: every stored instant is kept RELATIVE to the current real instant
 * `now` (stored value = instant - now + TB, 0 = no record) and all of them
 * shift by one at each tick; a record is dropped as soon as no future
 * behaviour depends on it. So the state space is finite without a horizon
 * and a run covers every schedule of unbounded length. Region i's Redis
 * TIME is now + off[i], off[i] in 0..2*EPS (any two clocks differ by <= 2 eps):
 * a record written by region i with local instant L is stored as
 * L - off[i] - now, and region k compares it at its local time now+t+off[k].
 *
 * Switches. Compile time: N (2 or 3 regions). Run time (environment of pan,
 * read once at the start; constants of the run, not part of the state):
 *   GQ_PLANT   0 = the safe model, else one planted rule removal (P_* below)
 *   GQ_LEASED  0 = unleased mode, 1 = leased mode, 2 = both (a choice at start)
 *   GQ_LOSS    1 = state losses may happen (any number), 0 = none
 *   GQ_POLICY  1 = one policy change of C and the base shares may happen
 *   GQ_LOANS   1 = loans (grant, ship, merge, return), 0 = none
 *   GQ_OFFS    0 = equal clocks or one region 2 eps ahead, 1 = every offset
 *              in 0..2 eps per region, 2 = equal clocks only
 *   GQ_CNEW    C after the policy change (N = 2: 1 = weights change only, 2)
 *   GQ_COLD    C before the policy change (N = 2: 1 or 2; 2 with GQ_CNEW=1 is a decrease)
 *   GQ_ROLD, GQ_RNEW  r before / after the change (tokens per tick at full share: 1 or 2)
 *   GQ_LCODE   1 = leases as lease_acquire.lua / lease_release.lua have them: up to NL
 *              leases per region, any number of units, the duration SHORTENED to the
 *              first instant the schedule stops backing it (not refused), the client
 *              spends unit by unit until the GRANTED expiry and releases the rest
 *   GQ_EXPIRY  1 = the bucket key P:b expires by the TTL rules of lib/keep.lua
 *   GQ_FAILOVER 1 = failovers without the durability wait (admissions answered at
 *              once: the promoted replica may lack those of the last tick), 2 = with
 *              it (durable admissions); a failover rotates the marker, book kept,
 *              detected up to PCHK ticks later
 */

#ifndef N
#define N 2
#endif

#define U     4            /* share units (ppm in the product) */
#ifndef EPS
#define EPS   1            /* clock margin, ticks (spin -DEPS=2: a time grain finer than eps) */
#endif
#ifndef D
#define D     3            /* loan duration = max lease duration, ticks */
#endif
#define FLOOR 1            /* every region's floor share */
#define RECLEN (D + 2*EPS) /* recovery length after a state loss */
#define NS    2            /* staircase entries a lender keeps per borrower */
#define TB    (AMAX + EPS) /* bias of stored relative instants (0 = none): a
                              lazy bucket looks back AMAX ticks, a margin EPS more */
#define AMAX  3            /* a lazy bucket is settled at least every AMAX ticks */
#define NL    2            /* leases per region (GQ_LCODE; else one) */
#define LI(i, j) ((i) * NL + (j))
#define PCHK  1            /* redis.primaryCheckMs in ticks: failover detection window */

/* Policy: C tokens and base shares, before and after the one change. */
#if N == 2
#define COLD cOld          /* GQ_COLD: 1 or 2 */
#define CNEW cNew          /* GQ_CNEW: 1 (weights change only) or 2 */
#define BOLD(i) ((i) == 0 -> 3 : 1)
#define BNEW(i) ((i) == 0 -> 2 : 2)
#define PICKR(v, g) if :: g(0) -> v = 0 :: g(1) -> v = 1 fi
/* a region and one of its leases (and the units asked: 0 = all, 1), one choice */
#define PICKS(g) if :: g(0, 0) -> cI = 0; cW = 0 :: g(0, 1) -> cI = 0; cW = 1 :: g(1, 0) -> cI = 1; cW = 0 :: g(1, 1) -> cI = 1; cW = 1 fi
#define PICKL(g) if :: g(0, 0, 0) -> cI = 0; cW = 0; cU = 0 :: g(0, 0, 1) -> cI = 0; cW = 0; cU = 1 :: g(0, 1, 0) -> cI = 0; cW = 1; cU = 0 :: g(0, 1, 1) -> cI = 0; cW = 1; cU = 1 :: g(1, 0, 0) -> cI = 1; cW = 0; cU = 0 :: g(1, 0, 1) -> cI = 1; cW = 0; cU = 1 :: g(1, 1, 0) -> cI = 1; cW = 1; cU = 0 :: g(1, 1, 1) -> cI = 1; cW = 1; cU = 1 fi
#define PICKP(a, b, g) if :: g(0, 1) -> a = 0; b = 1 :: g(1, 0) -> a = 1; b = 0 fi
#else
#define COLD 1
#define CNEW 1
#define BOLD(i) ((i) == 0 -> 2 : 1)
#define BNEW(i) ((i) == 0 -> 1 : ((i) == 1 -> 1 : 2))
#define PICKR(v, g) if :: g(0) -> v = 0 :: g(1) -> v = 1 :: g(2) -> v = 2 fi
#define PICKS(g) if :: g(0, 0) -> cI = 0; cW = 0 :: g(0, 1) -> cI = 0; cW = 1 :: g(1, 0) -> cI = 1; cW = 0 :: g(1, 1) -> cI = 1; cW = 1 :: g(2, 0) -> cI = 2; cW = 0 :: g(2, 1) -> cI = 2; cW = 1 fi
#define PICKL(g) if :: g(0, 0, 0) -> cI = 0; cW = 0; cU = 0 :: g(0, 0, 1) -> cI = 0; cW = 0; cU = 1 :: g(0, 1, 0) -> cI = 0; cW = 1; cU = 0 :: g(0, 1, 1) -> cI = 0; cW = 1; cU = 1 :: g(1, 0, 0) -> cI = 1; cW = 0; cU = 0 :: g(1, 0, 1) -> cI = 1; cW = 0; cU = 1 :: g(1, 1, 0) -> cI = 1; cW = 1; cU = 0 :: g(1, 1, 1) -> cI = 1; cW = 1; cU = 1 :: g(2, 0, 0) -> cI = 2; cW = 0; cU = 0 :: g(2, 0, 1) -> cI = 2; cW = 0; cU = 1 :: g(2, 1, 0) -> cI = 2; cW = 1; cU = 0 :: g(2, 1, 1) -> cI = 2; cW = 1; cU = 1 fi
#define PICKP(a, b, g) if :: g(0, 1) -> a = 0; b = 1 :: g(0, 2) -> a = 0; b = 2 :: g(1, 0) -> a = 1; b = 0 :: g(1, 2) -> a = 1; b = 2 :: g(2, 0) -> a = 2; b = 0 :: g(2, 1) -> a = 2; b = 1 fi
#endif
#define CMAX ((COLD) > (CNEW) -> (COLD) : (CNEW))
#define ROLD rOld          /* GQ_ROLD */
#define RNEW rNew          /* GQ_RNEW */

#define MIN(a, b) ((a) < (b) -> (a) : (b))
#define MAX(a, b) ((a) > (b) -> (a) : (b))
#define PI(j, k) ((j) * N + (k))
#define SI(j, k, e) (PI(j, k) * NS + (e))
#define REL(v) ((v) - TB)   /* stored instant -> instant relative to now */

/* ------------------------------------------------------------ plants */
/* Each planted variant removes ONE safety rule of DESIGN §3-4. The number is
 * the value of GQ_PLANT; model/plants.json lists them with the run that
 * finds each one's counterexample and the planted.json ids of the same bug. */
#define P_BORROWER_LATE          1   /* borrower uses to deadline + eps */
#define P_LENDER_SHORT           2   /* lender reserves only to deadline */
#define P_RESERVE_LAST           3   /* lender reserves the latest loan, not the max */
#define P_RELEND                 4   /* lends from its share, borrowed units included */
#define P_BELOW_FLOOR            5   /* lends below its floor */
#define P_LOAN_LONG              6   /* a loan runs longer than D */
#define P_COARSE_REFILL          7   /* the share at now credited over the interval */
#define P_CLAMP_NOW              8   /* split refill clamped only at now */
#define P_CLAMP_LARGER           9   /* each piece clamped to the larger capacity */
#define P_NO_SETTLE             10   /* share changed without settling first */
#define P_NO_CLAMP              11   /* tokens not clamped when the slice shrinks */
#define P_RETURN_REUSE          12   /* a returned seq is used again */
#define P_RETURN_KEEPS_USING    13   /* the borrower keeps using what it returned */
#define P_RETURN_FREES_NEWER    14   /* the lender frees newer grants on a return */
#define P_LEND_PINNED           15   /* lends share that backs a lease */
#define P_RETURN_PINNED         16   /* returns share that backs a lease */
#define P_LEASE_OUTLIVES_LOAN   17   /* a lease on borrowed share outlives deadline - eps */
#define P_LEASE_UNCOUNTED       18   /* leased tokens not counted against capacity */
#define P_LEASE_LONG            19   /* a lease runs longer than D */
#define P_SKIP_RECOVERY         20   /* no recovery after a state loss */
#define P_RECOVERY_SHORT        21   /* recovery lasts D, not D + 2 eps */
#define P_FULL_BUCKETS          22   /* buckets created in recovery start full */
#define P_GRANT_IN_RECOVERY     23   /* a recovering region grants loans */
#define P_RECOVERY_FLOOR        24   /* leased mode: floor, not 0, until D + eps */
#define P_RETURN_IN_RECOVERY    25   /* a recovering region returns early */
#define P_GROW_EARLY            26   /* growth before every region applied the change */
#define P_GROW_BEFORE_LAPSE     27   /* growth before the loans of the old base lapsed */
#define P_GROWTH_IGNORES_LEASES 28   /* growth waits for the old loans, not D + 2 eps */
#define P_LEND_IGNORES_OTHERS   29   /* lendable ignores what is reserved for other borrowers */
#define P_LEASE_TO_DEADLINE     30   /* a lease on borrowed share pinned to the deadline, not deadline - eps */
#define P_HOLD_SHORT            31   /* leased-mode recovery holds share 0 for D - eps, not D + eps */
#define P_CLIENT_LATE           32   /* a leased client spends up to eps after its lease expired */
#define P_CLIENT_ASKED          33   /* the client keeps the duration it asked for, not the granted one */
#define P_RELEASE_ALL           34   /* a release gives back every leased unit, the spent ones too */
#define P_KEEP_SKIPS_LIVE       35   /* keep() skips the TTL refresh while the key is still live */
#define P_TTL_SHORT             36   /* the TTL is shorter than C/r: a bucket expires before it is full */
#define P_DURABLE_EARLY         37   /* durable mode answers an admission before a replica has it */
#define P_DECREASE_AT_ONCE      38   /* the oracle's cap drops when a decrease is issued, not applied */
#define P_DECREASE_LATE         39   /* a region applies a decrease of C only when it grows */

hidden byte plant;                  /* GQ_PLANT (constant during a run) */
hidden byte pinning;                /* inside pinHolds (P_LEASE_TO_DEADLINE) */
hidden byte lazy;                   /* buckets settled lazily (refill plants) */
hidden byte fLeased, fLoss, fPolicy, fLoans, fOffs, cNew, cOld, rOld, rNew, fCode, fExp, fFail, ttlm;
#define PL(x) (plant == (x))

/* The margins of DESIGN §3 at relative instant t. d: stored deadline. */
#define USES(k, t, d) ((d) > 0 && (PL(P_BORROWER_LATE) -> ((t) + off[k] < REL(d) + EPS) : \
  ((pinning && PL(P_LEASE_TO_DEADLINE)) -> ((t) + off[k] < REL(d)) : ((t) + off[k] + EPS < REL(d)))))
#define RESERVES(j, t, d) ((d) > 0 && (PL(P_LENDER_SHORT) -> ((t) + off[j] < REL(d)) : ((t) + off[j] < REL(d) + EPS)))

/* how long after its lease's expiry a client still spends (0; eps planted) */
#define LATE (PL(P_CLIENT_LATE) -> EPS : 0)

/* ------------------------------------------------------------ state */

byte off[N];              /* Redis clock offset of each region (constant) */
bool leasedMode;          /* in-process leases configured (changes recovery) */
short gv;                 /* G1 witness: a token bucket of capacity C (x U) and
                             rate r (x U) that every admission drains; G1 over
                             every window <=> it never goes negative */

/* policy: pv 0 = old, 1 = shrinks applied, 2 = new in full */
bool polIssued;
byte pv[N];
byte gw;                  /* 0: not every region applied yet; then counts down
                             from D + 2 eps + 1 to 1: growth allowed at 1 */

/* Redis state of each region (lost with it) */
bool bex[N];              /* bucket P:b exists */
short tk[N];              /* bucket tokens (units; < 0: debt under leases) */
byte age[N];              /* ticks since the last settle (0 unless lazy) */
short sh[N];              /* lazy runs only: the reference bucket, settled at
                             every tick with each piece's own rate and capacity */
byte recE[N];             /* recovery end (stored instant; 0: not recovering) */
byte lg[N * NL];          /* P:k: leased units granted per lease (0: none) */
byte le[N * NL];          /* lease expiry in P:k (stored instant) */
/* in-process client of each region (survives the region's state loss) */
byte cl[N * NL];          /* units left to spend */
byte ce[N * NL];          /* the expiry the client uses (stored instant) */
byte bx[N];               /* GQ_EXPIRY: expiry of the key P:b (stored instant) */
byte lost[N];             /* GQ_FAILOVER: units admitted that the replica lacks */
byte fd[N];               /* GQ_FAILOVER: > 0 while a failover is not yet detected */

/* loans, index PI(lender, borrower); a loan's seq is its deadline: a lender
 * grants a borrower at most once per tick, so deadlines of a pair strictly
 * increase, also across a state loss (no grant for D + 2 eps after it). */
byte stU[N * N * NS]; byte stD[N * N * NS];   /* lender: o| staircase */
byte gU[N * N]; byte gD[N * N];               /* lender: g| register */
byte inU[N * N]; byte inD[N * N];             /* borrower: i| */
byte retS[N * N];                             /* borrower: r| (returned seq) */

/* The one message in flight (delayed, duplicated, overtaken or lost): a loan
 * register mf -> mt, or a return mf (borrower) -> mt (lender) of seq md.
 * Messages not in the slot are delivered at once (ship/return "direct"), so
 * a direct delivery overtakes the slot's older copy (reorder). */
byte mk;                  /* 0 none, 1 loan, 2 return */
byte mf; byte mt; byte mu; byte md;

/* nondeterministic choices of the current step (reset to 0 at its end) */
byte cI; byte cK; byte cU; byte cW;

/* scratch (not part of the state) */
hidden int hsd, hs, hb, hk, he, hm, hL, htk, ht, hsh, hC, hcap, hmaxc, hd;
hidden int hsu0, hsd0, hsu1, hsd1;
hidden int hcs[AMAX + 1], hrs[AMAX + 1];
hidden int hi, hsum, hpin, hsh2, hw, ho, hok, hx, hy, hseq, hfree, hz, hj, hR, hW;

/* ------------------------------------------------------------ share */

inline baseEff(i, res) {
  if
  :: pv[i] == 0 -> res = BOLD(i)
  :: pv[i] == 1 -> res = MIN(BOLD(i), BNEW(i))
  :: else -> res = BNEW(i)
  fi
}

inline cEff(i, res) {
  if
  :: pv[i] == 0 -> res = COLD
  :: pv[i] == 1 -> res = (PL(P_DECREASE_LATE) -> COLD : MIN(COLD, CNEW))
  :: else -> res = CNEW
  fi
}

inline rEff(i, res) {
  if
  :: pv[i] == 0 -> res = ROLD
  :: pv[i] == 1 -> res = MIN(ROLD, RNEW)
  :: else -> res = RNEW
  fi
}

/* The oracle's C and r: the largest that any region has applied, an increase
 * from the first region that grows, a decrease once the rollout completed:
 * every region applied it and the wait D + 2 eps after that passed (gw == 1).
 * Not at the last application: a region in leased-mode recovery applies a
 * decrease with its clients' leases forgotten (the pin check passes
 * vacuously), and those leases, granted at the old C, run up to D longer
 * (found by this model). P_DECREASE_AT_ONCE: C_new from the issue on. */
#define OV(i, o, n) (pv[i] == 0 -> (o) : (pv[i] == 1 -> (gw == 1 -> MIN(o, n) : (o)) : (n)))
#if N == 2
#define OMAX(o, n) MAX(OV(0, o, n), OV(1, o, n))
#else
#define OMAX(o, n) MAX(OV(0, o, n), MAX(OV(1, o, n), OV(2, o, n)))
#endif
#define WCAP ((PL(P_DECREASE_AT_ONCE) && polIssued) -> CNEW : OMAX(COLD, CNEW))
#define WRATE OMAX(ROLD, RNEW)

#define RECOV(i, t) (recE[i] > 0 && (t) < REL(recE[i]))

/* s_i at relative instant t (docs/internals.md "Share at time t"), in [0, U]. */
inline shareAt(i, t, res) {
  if
  :: RECOV(i, t) ->
    if
    :: leasedMode && !PL(P_RECOVERY_FLOOR) && (t) < REL(recE[i]) - (PL(P_HOLD_SHORT) -> 3 * EPS : EPS) -> res = 0
    :: else -> baseEff(i, hb); res = MIN(FLOOR, hb)
    fi
  :: else ->
    baseEff(i, hs);
    hk = 0;
    do
    :: hk < N ->
      if
      :: hk != i ->
        hm = 0; hsd = 0; he = 0;
        do
        :: he < NS ->
          if
          :: RESERVES(i, t, stD[SI(i, hk, he)]) ->
            if
            :: PL(P_RESERVE_LAST) -> if :: stD[SI(i, hk, he)] > hsd -> hsd = stD[SI(i, hk, he)]; hm = stU[SI(i, hk, he)] :: else -> skip fi
            :: else -> hm = MAX(hm, stU[SI(i, hk, he)])
            fi
          :: else -> skip
          fi;
          he++
        :: else -> break
        od;
        hs = hs - hm;
        if
        :: inD[PI(hk, i)] > retS[PI(hk, i)] && USES(i, t, inD[PI(hk, i)]) -> hs = hs + inU[PI(hk, i)]
        :: else -> skip
        fi
      :: else -> skip
      fi;
      hk++
    :: else -> break
    od;
    res = MIN(U, MAX(0, hs))
  fi
}

/* leased units the region's Redis counts against capacity at t */
#define OUT1(x, t) ((lg[x] > 0 && (t) < REL(le[x])) -> lg[x] : 0)
#define OUTST(i, t) (OUT1(LI(i, 0), t) + OUT1(LI(i, 1), t))
/* the client of lease x may still spend */
#define LIVE(x) (cl[x] > 0 && 0 < REL(ce[x]) + LATE)

/* ------------------------------------------------------------ lazy refill */

/* Bucket tokens settled to now, into htk; the share at now into hsh. Each
 * piece [t, t+1), t from -age to -1, is refilled at its own rate and clamped
 * to its own capacity; then the result is clamped to the capacity at now. A
 * bucket that does not exist is settled as created now (load_bucket): empty
 * before recoveryEnd + C/r (DESIGN §4), else full. */
inline calcSettle(i) {
  cEff(i, hC); rEff(i, hR);
  if
  :: bex[i] -> htk = tk[i]; hz = age[i]
  :: recE[i] > 0 && 0 < REL(recE[i]) + (hC + hR - 1) / hR && !PL(P_FULL_BUCKETS) -> htk = 0; hz = 0
  :: else -> htk = 1000; hz = 0
  fi;
  /* the share schedule over the interval, one shareAt per instant */
  ht = -hz;
  do
  :: ht <= 0 -> shareAt(i, ht, hsh); hcs[ht + AMAX] = hC * hsh - OUTST(i, ht); hrs[ht + AMAX] = hR * hsh; ht++
  :: else -> break
  od;
  if
  :: PL(P_COARSE_REFILL) ->   /* the share in force at now over the whole interval */
    htk = MIN(hcs[AMAX], htk + hrs[AMAX] * hz)
  :: else ->
    hmaxc = -100;
    ht = -hz;
    do
    :: ht <= 0 -> hmaxc = MAX(hmaxc, hcs[ht + AMAX]); ht++
    :: else -> break
    od;
    ht = -hz;
    do
    :: ht < 0 ->
      if
      :: PL(P_CLAMP_NOW) -> htk = htk + hrs[ht + AMAX]                   /* no clamp per piece */
      :: PL(P_CLAMP_LARGER) -> htk = MIN(hmaxc, htk + hrs[ht + AMAX])    /* the larger capacity */
      :: else -> htk = MIN(hcs[ht + AMAX], htk + hrs[ht + AMAX])
      fi;
      ht++
    :: else -> break
    od;
    if
    :: PL(P_NO_CLAMP) && bex[i] -> skip
    :: else -> htk = MIN(htk, hcs[AMAX])
    fi
  fi
}

/* settle(): load_bucket + settle of lib.lua */
inline settle(i) {
  if :: lazy && !bex[i] -> calcSettle(i); sh[i] = htk :: else -> calcSettle(i) fi;
  tk[i] = htk; age[i] = 0; bex[i] = 1
}

/* Tokens taken out of the bucket (admitted or leased) leave the reference too. */
#define TAKE(i, c) tk[i] = tk[i] - (c); if :: lazy -> sh[i] = sh[i] - (c) :: else -> skip fi

/* Every script that changes a share settles at the old share first (trap 11). */
inline presettle(i) {
  if
  :: PL(P_NO_SETTLE) && bex[i] -> skip
  :: else -> settle(i)
  fi
}

/* After a change the bucket settled to now is clamped to the new capacity
 * (apply_share_change); under P_NO_SETTLE this settles the whole interval
 * with the new records. */
#define postsettle(i) settle(i)

/* Pin check (DESIGN §3 "Process leases pin share"): with the records as they
 * stand now, the leased units fit the capacity at every instant from now to
 * the lease's expiry. Result in hok. */
inline pinHolds(i) {
  hok = 1; pinning = 1;
  cEff(i, hC);
  hx = 0;
  do
  :: OUTST(i, hx) > 0 ->
    shareAt(i, hx, hsh);
    if
    :: OUTST(i, hx) > hC * hsh -> hok = 0
    :: else -> skip
    fi;
    hx++
  :: else -> break
  od;
  pinning = 0
}

/* lib/keep.lua keep(): after a script wrote P:b, both TTLs are set to 2 ttl
 * unless the key still outlives the write by >= ttl (P_KEEP_SKIPS_LIVE: skipped
 * while it is live at all). ttl = ttlm ticks (P_TTL_SHORT: C/r - 1). */
inline keepB(i) {
  if
  :: fExp && bex[i] && (PL(P_KEEP_SKIPS_LIVE) -> bx[i] == 0 : REL(bx[i]) < ttlm) -> bx[i] = 2 * ttlm + TB
  :: else -> skip
  fi
}

/* ------------------------------------------------------------ invariants */

inline checkAll() {
  hsum = 0; hpin = 0; hi = 0;
  do
  :: hi < N ->
    calcSettle(hi);            /* tokens settled to now (htk), share at now (hsh) */
    hsh2 = hsh;
    if :: !bex[hi] -> htk = 0 :: else -> skip fi;
    hsum = hsum + hsh2;
    /* global form of the pin invariant: max(capacity of the applied share,
     * leased outstanding + bucket tokens) summed over regions <= C */
    cEff(hi, hcap);
    hcap = hcap * hsh2;
    if
    :: lazy && bex[hi] ->   /* the reference bucket, clamped at the capacity now */
      sh[hi] = MIN(sh[hi], hcs[AMAX]);
      if
      :: htk > sh[hi] -> printf("MSC: VIOLATION r%d lazy refill %d units > reference %d\n", hi, htk, sh[hi])
      :: else -> skip
      fi;
      assert(htk <= sh[hi])   /* lazy refill never credits a rate the region did not hold */
    :: else -> skip
    fi;
    ho = htk;
    if :: LIVE(LI(hi, 0)) -> ho = ho + cl[LI(hi, 0)] :: else -> skip fi;
    if :: LIVE(LI(hi, 1)) -> ho = ho + cl[LI(hi, 1)] :: else -> skip fi;
    hpin = hpin + MAX(hcap, ho);
    hi++
  :: else -> break
  od;
  hW = WCAP;   /* the oracle's C now */
  if
  :: hsum > U || hpin > hW * U ->
    printf("MSC: VIOLATION shares sum %d > %d or pinned sum %d > %d\n", hsum, U, hpin, hW * U)
  :: else -> skip
  fi;
  assert(hsum <= U);                                   /* sum of shares in use <= U */
  assert(hpin <= hW * U)                               /* leased + bucket pinned */
}

/* Admission of c units now: the G1 witness bucket must cover them. */
inline admitted(c) {
  gv = MIN(gv, WCAP * U) - (c);
  if
  :: gv < 0 -> printf("MSC: VIOLATION G1: admitted %d units over C + r*T\n", -gv)
  :: else -> skip
  fi;
  assert(gv >= 0)
}

/* ------------------------------------------------------------ time */

/* one stored instant one tick older; canonicalize() drops every record
 * before it could run out of range */
#define SHIFT(v) if :: v > 0 -> assert(v > 1); v-- :: else -> skip fi

/* Records that no future behaviour depends on are dropped, so equal futures
 * are one state. A lazy bucket may still settle from -age, so records are
 * kept while they matter at -age. */
inline canonicalize() {
  hi = 0;
  do
  :: hi < N ->
    hz = (bex[hi] -> -age[hi] : 0);
    hj = LI(hi, 0);
    do
    :: hj < LI(hi, NL) ->
      if
      :: lg[hj] > 0 && hz >= REL(le[hj]) -> lg[hj] = 0
      :: else -> skip
      fi;
      if
      :: cl[hj] > 0 && 0 >= REL(ce[hj]) + LATE -> cl[hj] = 0
      :: else -> skip
      fi;
      if :: lg[hj] == 0 -> le[hj] = 0 :: else -> skip fi;
      if :: cl[hj] == 0 -> ce[hj] = 0 :: else -> skip fi;
      hj++
    :: else -> break
    od;
    if :: bx[hi] > 0 && !bex[hi] -> bx[hi] = 0 :: else -> skip fi;
    hk = 0;
    do
    :: hk < N ->
      he = 0;
      do
      :: he < NS ->
        if
        :: stD[SI(hi, hk, he)] > 0 && !RESERVES(hi, hz, stD[SI(hi, hk, he)]) ->
          stU[SI(hi, hk, he)] = 0; stD[SI(hi, hk, he)] = 0
        :: else -> skip
        fi;
        he++
      :: else -> break
      od;
      if
      :: hk != hi && gD[PI(hi, hk)] > 0 && !USES(hk, 0, gD[PI(hi, hk)]) -> gU[PI(hi, hk)] = 0; gD[PI(hi, hk)] = 0
      :: else -> skip
      fi;
      if
      :: hk != hi && inD[PI(hk, hi)] > 0 && !USES(hi, hz, inD[PI(hk, hi)]) -> inU[PI(hk, hi)] = 0; inD[PI(hk, hi)] = 0
      :: else -> skip
      fi;
      if
      :: hk != hi && retS[PI(hk, hi)] > 0 && !USES(hi, hz, retS[PI(hk, hi)]) -> retS[PI(hk, hi)] = 0
      :: else -> skip
      fi;
      hk++
    :: else -> break
    od;
    if
    :: recE[hi] > 0 && ((bex[hi] && hz >= REL(recE[hi])) || (!bex[hi] && 0 >= REL(recE[hi]) + CMAX)) -> recE[hi] = 0
    :: else -> skip
    fi;
    hi++
  :: else -> break
  od;
  if
  :: mk == 1 && !USES(mt, 0, md) -> mk = 0; mf = 0; mt = 0; mu = 0; md = 0
  :: mk == 2 && !RESERVES(mt, (bex[mt] -> -age[mt] : 0), md) -> mk = 0; mf = 0; mt = 0; mu = 0; md = 0
  :: else -> skip
  fi
}

/* A failover detected (replication.ts createPrimaryWatcher, region_init.lua
 * 'replid'): the marker rotates, the region enters recovery as after a lost
 * marker, but the book is KEPT (loans, returned seqs, lease records): the
 * bucket is rebuilt from it (load_bucket: empty until recovery end + C/r). */
inline rotation(i) {
  fd[i] = 0; bex[i] = 0; tk[i] = 0; age[i] = 0; bx[i] = 0;
  recE[i] = RECLEN + TB
}

inline tick() {
  gv = MIN(WCAP * U, gv + WRATE * U);
  hi = 0;
  do
  :: hi < N ->
    SHIFT(recE[hi]); SHIFT(bx[hi]);
    SHIFT(le[LI(hi, 0)]); SHIFT(le[LI(hi, 1)]); SHIFT(ce[LI(hi, 0)]); SHIFT(ce[LI(hi, 1)]);
    lost[hi] = 0;   /* replication lag < 1 tick: the replica has every write of earlier ticks */
    if :: fd[hi] == 1 -> rotation(hi) :: fd[hi] > 1 -> fd[hi]-- :: else -> skip fi;
    hk = 0;
    do
    :: hk < N ->
      SHIFT(gD[PI(hi, hk)]); SHIFT(inD[PI(hi, hk)]); SHIFT(retS[PI(hi, hk)]);
      SHIFT(stD[SI(hi, hk, 0)]); SHIFT(stD[SI(hi, hk, 1)]);
      hk++
    :: else -> break
    od;
    hi++
  :: else -> break
  od;
  SHIFT(md);
  if :: gw > 1 -> gw-- :: else -> skip fi;
  hi = 0;
  do
  :: hi < N ->
    if   /* P:b expires (Redis drops it at its TTL; a later script re-creates it, load_bucket) */
    :: fExp && bex[hi] && REL(bx[hi]) <= 0 -> bex[hi] = 0; tk[hi] = 0; age[hi] = 0; bx[hi] = 0
    :: else -> skip
    fi;
    if
    :: bex[hi] ->
      if
      :: lazy ->   /* the reference bucket: the piece [-1, 0) at its own rate and capacity */
        cEff(hi, hC); rEff(hi, hR); shareAt(hi, -1, hsh);
        sh[hi] = MIN(hC * hsh - OUTST(hi, -1), sh[hi] + hR * hsh)
      :: else -> skip
      fi;
      age[hi]++;
      if :: !lazy || age[hi] >= AMAX -> settle(hi) :: else -> skip fi
    :: else -> skip
    fi;
    hi++
  :: else -> break
  od;
  canonicalize()
}

/* ------------------------------------------------------------ scripts */

/* loan_grant.lua: lender cI lends cU units to borrower cK until now + D. */
inline grant() {
  hok = !RECOV(cI, 0) || PL(P_GRANT_IN_RECOVERY);
  hd = off[cI] + D + TB + (PL(P_LOAN_LONG) -> 2 * EPS : 0);   /* the new deadline */
  /* current reservation for cK (hx) and the others' (hy) */
  hx = 0; hy = 0; hw = 0;
  do
  :: hw < N ->
    if
    :: hw != cI ->
      hm = 0; he = 0;
      do
      :: he < NS ->
        if
        :: RESERVES(cI, 0, stD[SI(cI, hw, he)]) -> hm = MAX(hm, stU[SI(cI, hw, he)])
        :: else -> skip
        fi;
        he++
      :: else -> break
      od;
      if :: hw == cK -> hx = hm :: else -> hy = hy + hm fi
    :: else -> skip
    fi;
    hw++
  :: else -> break
  od;
  /* lendable: own base only (trap 3), never below floor */
  if
  :: PL(P_RELEND) -> shareAt(cI, 0, hsh); hb = hsh + hx   /* borrowed units included */
  :: PL(P_LEND_IGNORES_OTHERS) -> baseEff(cI, hb)   /* only cK's own reservation counted (hx) */
  :: else -> baseEff(cI, hb); hb = hb - hy
  fi;
  if :: !PL(P_BELOW_FLOOR) -> hb = hb - FLOOR :: else -> skip fi;
  if :: MAX(cU, hx) > hb -> hok = 0 :: else -> skip fi;
  /* one grant per borrower per tick (a gossip round per tick): bounds seq */
  he = 0;
  do
  :: he < NS -> if :: stD[SI(cI, cK, he)] == hd -> hok = 0 :: else -> skip fi; he++
  :: else -> break
  od;
  if
  :: hok ->
    presettle(cI);
    hsu0 = stU[SI(cI, cK, 0)]; hsd0 = stD[SI(cI, cK, 0)]; hsu1 = stU[SI(cI, cK, 1)]; hsd1 = stD[SI(cI, cK, 1)];
    /* drop lapsed and dominated entries, then take a free slot */
    hfree = NS; he = 0;
    do
    :: he < NS ->
      if
      :: stD[SI(cI, cK, he)] > 0 && (!RESERVES(cI, 0, stD[SI(cI, cK, he)]) ||
           (stU[SI(cI, cK, he)] <= cU && stD[SI(cI, cK, he)] <= hd)) ->
        stU[SI(cI, cK, he)] = 0; stD[SI(cI, cK, he)] = 0
      :: else -> skip
      fi;
      if :: stD[SI(cI, cK, he)] == 0 && hfree == NS -> hfree = he :: else -> skip fi;
      he++
    :: else -> break
    od;
    if
    :: hfree < NS ->
      stU[SI(cI, cK, hfree)] = cU; stD[SI(cI, cK, hfree)] = hd;
      if :: !PL(P_LEND_PINNED) -> pinHolds(cI) :: else -> skip fi;
      if
      :: hok -> gU[PI(cI, cK)] = cU; gD[PI(cI, cK)] = hd
      :: else ->   /* the loan would take share that backs a lease: refused */
        stU[SI(cI, cK, 0)] = hsu0; stD[SI(cI, cK, 0)] = hsd0; stU[SI(cI, cK, 1)] = hsu1; stD[SI(cI, cK, 1)] = hsd1
      fi
    :: else -> hok = 0   /* staircase full: the model's lender does not lend */
    fi;
    postsettle(cI)
  :: else -> skip
  fi
}

/* loan_merge.lua: borrower cK merges loan (hx units, deadline hd) from lender
 * cI. Higher seq wins; a seq <= the returned one is never used again (trap 12). */
inline merge() {
  hy = PI(cI, cK);
  if
  :: hd > retS[hy] && (hd > inD[hy] || (hd == inD[hy] && hx < inU[hy])) ->
    presettle(cK);
    inU[hy] = hx; inD[hy] = hd;
    /* drop_lapsed (a returned loan stays: it bounds r|) */
    if
    :: !USES(cK, 0, inD[hy]) -> inU[hy] = 0; inD[hy] = 0
    :: else -> skip
    fi;
    postsettle(cK)
  :: else -> skip
  fi
}

/* loan_return_received.lua: lender cI frees entries for cK with seq <= hseq. */
inline returnReceived() {
  presettle(cI);
  he = 0;
  do
  :: he < NS ->
    if
    :: stD[SI(cI, cK, he)] > 0 && (stD[SI(cI, cK, he)] <= hseq || PL(P_RETURN_FREES_NEWER)) ->
      stU[SI(cI, cK, he)] = 0; stD[SI(cI, cK, he)] = 0
    :: else -> skip
    fi;
    he++
  :: else -> break
  od;
  postsettle(cI)
}

/* loan_return.lua: borrower cK returns early the loan held from lender cI.
 * hok = 1 when returned (hseq = its seq). A recovering region returns nothing
 * early: its Redis forgot the leases its clients may still hold on borrowed
 * share, so it cannot tell which share backs none (found by this model). */
inline giveBack() {
  hy = PI(cI, cK);
  hok = 0;
  if
  :: inD[hy] > retS[hy] && USES(cK, 0, inD[hy]) && (!RECOV(cK, 0) || PL(P_RETURN_IN_RECOVERY)) ->
    presettle(cK);
    hseq = inD[hy];
    retS[hy] = hseq;
    hok = 1;
    if :: !PL(P_RETURN_PINNED) -> pinHolds(cK) :: else -> skip fi;
    if
    :: hok ->
      if
      :: PL(P_RETURN_REUSE) -> retS[hy] = 0; inU[hy] = 0; inD[hy] = 0   /* forgets the seq */
      :: PL(P_RETURN_KEEPS_USING) -> retS[hy] = hseq - 1                /* records a lower seq */
      :: else -> skip
      fi
    :: else -> retS[hy] = 0   /* backs a lease: kept */
    fi;
    postsettle(cK)
  :: else -> skip
  fi
}

/* lease_acquire.lua: region cI's client asks for a lease (slot hj) of cU units
 * (0: every token) for hd ticks. Without GQ_LCODE: the whole bucket, refused
 * when the pin fails. With it (the code): granted = min(asked, tokens), the
 * expiry cut to the first instant the schedule stops backing the lease; the
 * client uses the GRANTED expiry (P_CLIENT_ASKED: the asked one). */
inline leaseAcquire() {
  if
  :: lg[hj] == 0 && cl[hj] == 0 ->
    settle(cI);
    if
    :: tk[cI] > 0 ->
      lg[hj] = (cU == 0 -> tk[cI] : MIN(cU, tk[cI])); le[hj] = hd + TB;
      if
      :: fCode ->   /* shortened, never refused */
        cEff(cI, hC); pinning = 1; hx = 1;
        do
        :: hx < hd ->
          shareAt(cI, hx, hsh);
          if
          :: (PL(P_LEASE_OUTLIVES_LOAN) -> 0 : hC * hsh - OUTST(cI, hx) < 0) -> le[hj] = hx + TB; break
          :: else -> hx++
          fi
        :: else -> break
        od;
        pinning = 0; hok = 1
      :: PL(P_LEASE_OUTLIVES_LOAN) ->  /* checked at now only */
        shareAt(cI, 0, hsh); cEff(cI, hC); hok = (lg[hj] <= hC * hsh)
      :: else -> pinHolds(cI)
      fi;
      if
      :: hok ->
        cl[hj] = lg[hj]; ce[hj] = (PL(P_CLIENT_ASKED) -> hd + TB : le[hj]); TAKE(cI, lg[hj]);
        if :: PL(P_LEASE_UNCOUNTED) -> lg[hj] = 0 :: else -> skip fi   /* not counted against capacity */
      :: else -> lg[hj] = 0; le[hj] = 0
      fi
    :: else -> skip
    fi
  :: else -> skip
  fi
}

/* lease_release.lua (or a release riding on lease_acquire): the client of
 * lease hj gives back what it did not spend; not after the lease expired in
 * Redis (then it all counts as used). P_RELEASE_ALL: gives back every unit. */
inline leaseRelease() {
  presettle(cI);
  hx = (PL(P_RELEASE_ALL) -> lg[hj] : cl[hj]);
  tk[cI] = tk[cI] + hx;
  if :: lazy -> sh[cI] = sh[cI] + hx :: else -> skip fi;
  lg[hj] = 0; le[hj] = 0; cl[hj] = 0; ce[hj] = 0;
  postsettle(cI)
}

/* A failover of region cI's Redis: a replica is promoted with the book as it
 * had it: without durability (GQ_FAILOVER=1) it lacks the admissions of the
 * current tick (lost), which come back as tokens; the oracle allows exactly
 * those (store.ts: "a failover may then forget up to the replication lag").
 * Durable (2): an admission is answered only once a replica has it, so
 * nothing is lost (P_DURABLE_EARLY: answered before). The old marker stays
 * until the primary watcher sees the new replication id, at most PCHK ticks
 * later (rotation). */
inline failover() {
  settle(cI);
  tk[cI] = tk[cI] + lost[cI];
  if :: fFail == 1 -> gv = gv + lost[cI] :: else -> skip fi;
  lost[cI] = 0;
  settle(cI);
  fd[cI] = PCHK + 1
}

/* State loss of region cI (marker gone: a wipe, or a failover modelled as
 * one): its Redis state is gone, a new incarnation is born now. A failover
 * that keeps the book is failover() + rotation() (GQ_FAILOVER). */
inline stateLoss() {
  bex[cI] = 0; tk[cI] = 0; sh[cI] = 0; age[cI] = 0; bx[cI] = 0;
  lg[LI(cI, 0)] = 0; le[LI(cI, 0)] = 0; lg[LI(cI, 1)] = 0; le[LI(cI, 1)] = 0;
  hk = 0;
  do
  :: hk < N ->
    he = 0;
    do
    :: he < NS -> stU[SI(cI, hk, he)] = 0; stD[SI(cI, hk, he)] = 0; he++
    :: else -> break
    od;
    gU[PI(cI, hk)] = 0; gD[PI(cI, hk)] = 0;
    inU[PI(hk, cI)] = 0; inD[PI(hk, cI)] = 0; retS[PI(hk, cI)] = 0;
    hk++
  :: else -> break
  od;
  if
  :: PL(P_SKIP_RECOVERY) -> recE[cI] = 0
  :: PL(P_RECOVERY_SHORT) -> recE[cI] = D + TB
  :: else -> recE[cI] = RECLEN + TB
  fi
}

/* Policy: region cI applies the issued version; shrinks at once (waiting for
 * its leases), growth only once every region has applied it. */
inline policyApply() {
  presettle(cI);
  pv[cI] = (PL(P_GROW_EARLY) -> 2 : 1);
  /* DESIGN §3: a base change waits for the leases. The shrink is pin-checked
   * here; removing that check alone breaks nothing on these instances, since
   * growth waits D + 2 eps and leases last at most D: the rule is realized by
   * that wait, falsified by P_GROWTH_IGNORES_LEASES and P_LEASE_LONG
   * (model/README.md). */
  pinHolds(cI); if :: !hok -> pv[cI] = 0 :: else -> skip fi;
  postsettle(cI)
}

#define ALLAPPLIED (pv[0] != 0 && pv[1] != 0 && (N == 2 || pv[N - 1] != 0))

/* hL = max(hL, the real instant, relative to now, of deadline d of lender j) */
#define LATER(d, j) if :: (d) > 0 && REL(d) - off[j] > hL -> hL = REL(d) - off[j] :: else -> skip fi

/* The growth wait, set in gw once every region applied the change: D + 2 eps
 * (a loan granted from an old base just before lapses by then, and so does a
 * lease, capped at D). P_GROWTH_IGNORES_LEASES: the plausible wrong wait, the
 * latest deadline of the loans actually outstanding (lender staircases and
 * registers, borrowers' loans, the message in flight) + 2 eps: it waits for
 * every loan from an old base, but not for a lease drawn on base share that
 * a region in leased-mode recovery took before its state loss. */
inline growthWait() {
  if
  :: PL(P_GROW_BEFORE_LAPSE) -> gw = 1
  :: PL(P_GROWTH_IGNORES_LEASES) ->
    hL = 0; hi = 0;
    do
    :: hi < N ->
      hk = 0;
      do
      :: hk < N ->
        LATER(stD[SI(hi, hk, 0)], hi); LATER(stD[SI(hi, hk, 1)], hi);
        LATER(gD[PI(hi, hk)], hi); LATER(inD[PI(hi, hk)], hi);
        hk++
      :: else -> break
      od;
      hi++
    :: else -> break
    od;
    if :: mk == 1 -> LATER(md, mf) :: else -> skip fi;
    gw = hL + 2 * EPS + 1
  :: else -> gw = D + 2 * EPS + 1
  fi
}

/* Guards of the steps: a step that would change nothing is not offered
 * (fewer transitions, same states). */
#define ANY(i) 1
#define CANLEND(j, k) (fLoans && (BOLD(j) > FLOOR || (fPolicy && BNEW(j) > FLOOR) || PL(P_BELOW_FLOOR) || PL(P_RELEND)))
#define HASREG(j, k) (gD[PI(j, k)] > 0)
#define HASLOAN(j, k) (inD[PI(j, k)] > retS[PI(j, k)])
#define FREE(x) (lg[x] == 0 && cl[x] == 0)
#define CANLEASE(i, w, u) (leasedMode && FREE(LI(i, w)) && (fCode || (w == 0 && u == 0)))
#define CANSPEND(i, w) LIVE(LI(i, w))
#define CANRELEASE(i, w) (fCode && lg[LI(i, w)] > 0 && 0 < REL(le[LI(i, w)]))
#define CANFAIL(i) (fFail && fd[i] == 0)
#define DETECT(i) (fd[i] > 0)
#define PV0(i) (polIssued && pv[i] == 0)
#define PV1(i) (gw == 1 && pv[i] == 1)

#define ENDSTEP cI = 0; cK = 0; cU = 0; cW = 0

active proctype world() {
  c_code {
    plant = getenv("GQ_PLANT") ? atoi(getenv("GQ_PLANT")) : 0;
    fLeased = getenv("GQ_LEASED") ? atoi(getenv("GQ_LEASED")) : 2;
    fLoss = getenv("GQ_LOSS") ? atoi(getenv("GQ_LOSS")) : 1;
    fPolicy = getenv("GQ_POLICY") ? atoi(getenv("GQ_POLICY")) : 1;
    fLoans = getenv("GQ_LOANS") ? atoi(getenv("GQ_LOANS")) : 1;
    fOffs = getenv("GQ_OFFS") ? atoi(getenv("GQ_OFFS")) : 0;
    cNew = getenv("GQ_CNEW") ? atoi(getenv("GQ_CNEW")) : 1;
    cOld = getenv("GQ_COLD") ? atoi(getenv("GQ_COLD")) : 1;
    rOld = getenv("GQ_ROLD") ? atoi(getenv("GQ_ROLD")) : 1;
    rNew = getenv("GQ_RNEW") ? atoi(getenv("GQ_RNEW")) : 1;
    fCode = getenv("GQ_LCODE") ? atoi(getenv("GQ_LCODE")) : 0;
    fExp = getenv("GQ_EXPIRY") ? atoi(getenv("GQ_EXPIRY")) : 0;
    fFail = getenv("GQ_FAILOVER") ? atoi(getenv("GQ_FAILOVER")) : 0;
  };
  /* lib/keep.lua: ttl = C/r + D + 3 eps (+ 1 s of slack, not modelled), in ticks */
  ttlm = (CMAX + MIN(ROLD, RNEW) - 1) / MIN(ROLD, RNEW) + D + 3 * EPS;
  if :: PL(P_TTL_SHORT) -> ttlm = (CMAX + MIN(ROLD, RNEW) - 1) / MIN(ROLD, RNEW) - 1 :: else -> skip fi;
  lazy = PL(P_COARSE_REFILL) || PL(P_CLAMP_NOW) || PL(P_CLAMP_LARGER) || PL(P_NO_SETTLE);
  printf("MSC: eps %d D %d plant %d leased %d loss %d policy %d loans %d offsets %d lazy %d\n", EPS, D, plant, fLeased, fLoss, fPolicy, fLoans, fOffs, lazy);
  atomic {
    /* clocks: any offsets within 2 eps; leased mode on or off */
    if
    :: fOffs == 1 ->
      cI = 0;
      do
      :: cI < N ->   /* any offset in 0..2 eps */
        off[cI] = 0; do :: off[cI] < 2 * EPS -> off[cI]++ :: break od; cI++
      :: else -> break
      od
    :: fOffs == 2 -> skip   /* equal clocks only (enough without loans) */
    :: else ->
      /* equal clocks (all equal offsets are alike), or one region 2 eps ahead */
      if :: skip :: PICKR(cI, ANY); off[cI] = 2 * EPS fi
    fi;
    if
    :: fLeased == 2 -> if :: leasedMode = 1 :: leasedMode = 0 fi
    :: else -> leasedMode = fLeased
    fi;
    /* a fresh cluster: buckets full (docs/internals.md "Fresh clusters") */
    cI = 0;
    do
    :: cI < N -> bex[cI] = 1; tk[cI] = COLD * BOLD(cI); sh[cI] = (lazy -> tk[cI] : 0);
       if :: fExp -> bx[cI] = 2 * ttlm + TB :: else -> skip fi; cI++
    :: else -> break
    od;
    gv = COLD * U;
    printf("MSC: offsets %d %d, leased mode %d\n", off[0], off[1], leasedMode);
    ENDSTEP
  };
end_loop:
  do
  :: d_step { tick(); printf("MSC: tick\n"); checkAll() }
  :: atomic { PICKR(cI, ANY);          /* a check: settle (creating the bucket), admit every whole unit */
       d_step { settle(cI);
         if
         :: tk[cI] >= 1 -> hx = tk[cI]; TAKE(cI, hx); printf("MSC: r%d admits %d units\n", cI, hx); admitted(hx);
           if :: fFail == 1 || PL(P_DURABLE_EARLY) -> lost[cI] = lost[cI] + hx :: else -> skip fi
         :: else -> skip
         fi;
         keepB(cI); checkAll(); ENDSTEP } }
  :: atomic { PICKP(cI, cK, CANLEND);
       if :: cU = 1 :: cU = 2 :: PL(P_BELOW_FLOOR) || PL(P_RELEND) -> cU = 3 fi;
       d_step { grant(); printf("MSC: r%d grants r%d %d units (ok %d)\n", cI, cK, cU, hok); keepB(cI); checkAll(); ENDSTEP } }
  :: atomic { PICKP(cI, cK, HASREG);    /* gossip: lender cI ships its register */
       if :: cW = 0 :: cW = 1 fi;         /* merged at once, or put in flight */
       d_step {
         if
         :: cW == 0 -> hx = gU[PI(cI, cK)]; hd = gD[PI(cI, cK)]; merge();
            printf("MSC: r%d ships its loan to r%d, merged at once\n", cI, cK); keepB(cK); checkAll()
         :: else -> mk = 1; mf = cI; mt = cK; mu = gU[PI(cI, cK)]; md = gD[PI(cI, cK)];
            printf("MSC: r%d ships its loan to r%d, in flight\n", cI, cK)
         fi;
         ENDSTEP } }
  :: atomic { PICKP(cI, cK, HASLOAN);    /* borrower cK returns early the loan of cI */
       if :: cW = 0 :: cW = 1 fi;         /* received at once, or put in flight */
       d_step { giveBack(); printf("MSC: r%d returns early the loan of r%d (ok %d)\n", cK, cI, hok);
         if
         :: hok && cW == 0 -> returnReceived(); printf("MSC: r%d receives the return at once\n", cI); keepB(cI)
         :: hok && cW == 1 -> mk = 2; mf = cK; mt = cI; mu = 0; md = hseq; printf("MSC: the return is in flight\n")
         :: else -> skip
         fi;
         keepB(cK); checkAll(); ENDSTEP } }
  :: atomic { mk != 0 ->         /* the message in flight arrives */
       d_step {
         if
         :: mk == 1 -> cI = mf; cK = mt; hx = mu; hd = md; merge(); printf("MSC: r%d merges the loan of r%d in flight\n", cK, cI); keepB(cK)
         :: else -> cI = mt; cK = mf; hseq = md; returnReceived(); printf("MSC: r%d receives the return in flight\n", cI); keepB(cI)
         fi;
         checkAll() };
       if   /* delivered once, or kept to be delivered again (duplicate, late copy) */
       :: d_step { mk = 0; mf = 0; mt = 0; mu = 0; md = 0 }
       :: skip
       fi;
       ENDSTEP }
  :: d_step { mk != 0 -> mk = 0; mf = 0; mt = 0; mu = 0; md = 0; printf("MSC: the message in flight is lost\n") }
  :: atomic { PICKL(CANLEASE);   /* which lease (GQ_LCODE: two), how many units (0: all; GQ_LCODE: or one) */
       d_step { hj = LI(cI, cW); hd = (PL(P_LEASE_LONG) -> D + 3 * EPS : D); leaseAcquire();
         printf("MSC: r%d client leases %d units for %d ticks (lease %d)\n", cI, cl[hj], REL(ce[hj]), cW); keepB(cI); checkAll(); ENDSTEP } }
  :: atomic { PICKS(CANSPEND);    /* the client spends its lease (GQ_LCODE: one unit) */
       d_step {
         hj = LI(cI, cW); hx = (fCode -> 1 : cl[hj]); cl[hj] = cl[hj] - hx;
         if :: cl[hj] == 0 -> ce[hj] = 0 :: else -> skip fi;
         printf("MSC: r%d client spends %d units (lease %d)\n", cI, hx, cW); admitted(hx);
         checkAll(); ENDSTEP } }
  :: atomic { PICKS(CANRELEASE);    /* the client releases a lease, the unspent units back */
       d_step { hj = LI(cI, cW); leaseRelease(); printf("MSC: r%d client releases lease %d (%d units back)\n", cI, cW, hx); keepB(cI); checkAll(); ENDSTEP } }
  :: atomic { PICKR(cI, CANFAIL); d_step { failover(); printf("MSC: r%d fails over (replica promoted, book kept)\n", cI); checkAll(); ENDSTEP } }
  :: atomic { PICKR(cI, DETECT); d_step { rotation(cI); printf("MSC: r%d detects the failover: marker rotated, recovery\n", cI); checkAll(); ENDSTEP } }
  :: atomic { fLoss -> PICKR(cI, ANY); d_step { stateLoss(); printf("MSC: r%d loses its Redis state\n", cI); checkAll(); ENDSTEP } }
  :: d_step { fPolicy && !polIssued -> polIssued = 1; printf("MSC: policy change issued\n") }
  :: atomic { PICKR(cI, PV0);
       d_step { policyApply(); keepB(cI); printf("MSC: r%d applies the new policy (pv %d)\n", cI, pv[cI]);
         /* growth waits until the loans granted from an old, larger base lapsed */
         if :: gw == 0 && ALLAPPLIED -> growthWait() :: else -> skip fi;
         checkAll(); ENDSTEP } }
  :: atomic { PICKR(cI, PV1);
       d_step { presettle(cI); pv[cI] = 2; postsettle(cI); keepB(cI); printf("MSC: r%d grows to the new policy\n", cI);
         checkAll(); ENDSTEP } }
  od
}
