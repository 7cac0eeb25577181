/*
 * geoquota.pml: a Promela model of DESIGN §3-4 (leases, loans, lazy split
 * refill, process leases pinned to share, recovery after state loss, policy
 * changes) for one key of a token bucket, checked exhaustively by Spin.
 * model/README.md maps every action below to the Lua script and TypeScript
 * function it abstracts and says what the model leaves out.
 *
 * Units. Share: integers out of U. Tokens are counted in 1/U of a token
 * ("units"), so region i's capacity C*s_i/U tokens is exactly C*s_i units
 * and its refill r*s_i/U tokens per tick is r*s_i units per tick.
 * Time: discrete ticks of real time `now`; region i's Redis TIME is
 * now + off[i], off[i] in 0..2*EPS (any two clocks differ by <= 2 eps).
 *
 * Compile-time switches: N (2 or 3 regions), H (horizon in ticks),
 * WH (admission history length), one PLANT_* at a time (a safety rule removed).
 */

#ifndef N
#define N 2
#endif

#define U     4            /* share units (ppm in the product) */
#define EPS   1            /* clock margin, ticks */
#define D     3            /* loan duration = max lease duration, ticks */
#define R     1            /* refill: tokens per tick at full share */
#define FLOOR 1            /* every region's floor share */
#define RECLEN (D + 2*EPS) /* recovery length after a state loss */
#define NS    2            /* staircase entries a lender keeps per borrower */

#ifndef H
#define H 9
#endif
#ifndef WH
#define WH 4
#endif
#ifndef MAXLOSS
#define MAXLOSS 1
#endif

/* Policy: C tokens and base shares, before and after the one change. */
#if N == 2
#define COLD 1
#define CNEW 2
#define BOLD(i) ((i) == 0 -> 3 : 1)
#define BNEW(i) ((i) == 0 -> 2 : 2)
#define PICKR(v) if :: v = 0 :: v = 1 fi
#define PICKP(a, b) if :: a = 0; b = 1 :: a = 1; b = 0 fi
#else
#define COLD 1
#define CNEW 1
#define BOLD(i) ((i) == 0 -> 2 : 1)
#define BNEW(i) ((i) == 0 -> 1 : ((i) == 1 -> 1 : 2))
#define PICKR(v) if :: v = 0 :: v = 1 :: v = 2 fi
#define PICKP(a, b) if :: a = 0; b = 1 :: a = 0; b = 2 :: a = 1; b = 0 :: a = 1; b = 2 :: a = 2; b = 0 :: a = 2; b = 1 fi
#endif

#define MIN(a, b) ((a) < (b) -> (a) : (b))
#define MAX(a, b) ((a) > (b) -> (a) : (b))
#define PI(j, k) ((j) * N + (k))
#define SI(j, k, e) (PI(j, k) * NS + (e))

/* The margins of DESIGN §3 (and the planted variants that break them). */
#ifdef PLANT_BORROWER_LATE
#define USES(t, d) ((t) < (d) + EPS)          /* borrower uses to deadline + eps */
#else
#define USES(t, d) ((t) + EPS < (d))          /* now_k < deadline - eps */
#endif
#ifdef PLANT_LENDER_SHORT
#define RESERVES(t, d) ((t) < (d))            /* lender reserves only to deadline */
#else
#define RESERVES(t, d) ((t) < (d) + EPS)      /* now_j < deadline + eps */
#endif

/* ------------------------------------------------------------ state */

byte now;                 /* real time */
byte off[N];              /* Redis clock offset of each region */
bool leasedMode;          /* in-process leases configured (changes recovery) */
byte adm[WH];             /* units admitted at real ticks now-WH+1 .. now */
byte losses;

/* policy: pv 0 = old, 1 = shrinks applied, 2 = new in full */
bool polIssued;
byte pv[N];

/* Redis state of each region (lost with it) */
bool bex[N];              /* bucket P:b exists */
short tk[N];              /* bucket tokens (units; may be < 0: debt under leases) */
byte ts[N];               /* local time of the last settle */
bool rec[N];              /* the incarnation was born by a state loss */
byte born[N];             /* its birth, local time */
byte lg[N];               /* P:k: leased units granted (0: none) */
byte le[N];               /*      its expiry, local time */

/* in-process client of each region (survives the region's state loss) */
byte cl[N];               /* units left to spend */
byte ce[N];               /* stop instant (local time of the region) */

/* loans, index PI(lender, borrower) */
/* A loan's seq is its deadline: a lender grants a borrower at most once per
 * tick, so deadlines of one lender-borrower pair strictly increase, also
 * across a state loss (no grant for D + 2 eps after it). */
byte stU[N * N * NS]; byte stD[N * N * NS];   /* lender: o| staircase */
byte gU[N * N]; byte gD[N * N];               /* lender: g| register */
byte inU[N * N]; byte inD[N * N];             /* borrower: i| */
byte retS[N * N];                             /* borrower: r| (returned seq) */
byte nU[N * N]; byte nD[N * N];               /* loan message in flight j->k */
byte rn[N * N];                               /* return message k->j (seq) */

/* nondeterministic choices of the current step (reset to 0 at its end) */
byte cI; byte cK; byte cU;

/* scratch (not part of the state) */
hidden int hs, hb, hk, he, hm, hL, htk, ht, hsh, hC, hcap, hmaxc;
hidden int hsu0, hsd0, hsu1, hsd1;
hidden int hi, hsum, hpin, hsh2, hL2, hw, ho, hok, hx, hy, hseq, hfree;

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
  :: pv[i] == 1 -> res = MIN(COLD, CNEW)
  :: else -> res = CNEW
  fi
}

#define RECOV(i, t) (rec[i] && (t) < born[i] + RECLEN)

/* s_i(t) of docs/internals.md at local time t, clamped to [0, U]. */
inline shareAt(i, t, res) {
  if
  :: RECOV(i, t) ->
#ifdef PLANT_RECOVERY_FLOOR
    baseEff(i, hb); res = MIN(FLOOR, hb)
#else
    if
    :: leasedMode && (t) < born[i] + D + EPS -> res = 0
    :: else -> baseEff(i, hb); res = MIN(FLOOR, hb)
    fi
#endif
  :: else ->
    baseEff(i, hs);
    hk = 0;
    do
    :: hk < N ->
      if
      :: hk != i ->
        hm = 0; he = 0;
        do
        :: he < NS ->
          if
          :: stU[SI(i, hk, he)] > hm && RESERVES(t, stD[SI(i, hk, he)]) -> hm = stU[SI(i, hk, he)]
          :: else -> skip
          fi;
          he++
        :: else -> break
        od;
        hs = hs - hm;
        if
        :: inD[PI(hk, i)] > retS[PI(hk, i)] && USES(t, inD[PI(hk, i)]) -> hs = hs + inU[PI(hk, i)]
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

/* leased units the region's Redis counts against capacity at local t */
#define OUTST(i, t) ((lg[i] > 0 && (t) < le[i]) -> lg[i] : 0)

/* ------------------------------------------------------------ lazy refill */

/* Bucket tokens settled to now, into htk (bucket must exist). Each piece
 * [t, t+1) is refilled at its own rate and clamped to its own capacity. */
inline calcSettle(i) {
  hL = now + off[i];
  htk = tk[i];
  ht = ts[i];
  cEff(i, hC);
#ifdef PLANT_COARSE_REFILL
  /* the share in force at now credited over the whole interval */
  shareAt(i, hL, hsh);
  htk = MIN(hC * hsh - OUTST(i, hL), htk + R * hsh * (hL - ht));
#else
#ifdef PLANT_CLAMP_LARGER
  hmaxc = -100;
  hx = ht;
  do
  :: hx <= hL -> shareAt(i, hx, hsh); hmaxc = MAX(hmaxc, hC * hsh - OUTST(i, hx)); hx++
  :: else -> break
  od;
#endif
  do
  :: ht < hL ->
    shareAt(i, ht, hsh);
#if defined(PLANT_CLAMP_NOW)
    htk = htk + R * hsh;                       /* no clamp per piece */
#elif defined(PLANT_CLAMP_LARGER)
    htk = MIN(hmaxc, htk + R * hsh);           /* clamped at the larger capacity */
#else
    htk = MIN(hC * hsh - OUTST(i, ht), htk + R * hsh);
#endif
    ht++
  :: else -> break
  od;
  shareAt(i, hL, hsh);
  htk = MIN(htk, hC * hsh - OUTST(i, hL))
#endif
}

/* A bucket created now starts empty before recoveryEnd + C/r (DESIGN §4). */
inline createBucket(i) {
  hL = now + off[i];
  cEff(i, hC);
  shareAt(i, hL, hsh);
#ifdef PLANT_FULL_BUCKETS
  tk[i] = hC * hsh - OUTST(i, hL);
#else
  if
  :: rec[i] && hL < born[i] + RECLEN + (hC + R - 1) / R -> tk[i] = 0
  :: else -> tk[i] = hC * hsh - OUTST(i, hL)
  fi;
#endif
  ts[i] = hL;
  bex[i] = 1
}

/* settle(): load_bucket + settle of lib.lua */
inline settle(i) {
  if
  :: bex[i] -> calcSettle(i); tk[i] = htk; ts[i] = hL
  :: else -> createBucket(i)
  fi
}

/* Every script that changes a share settles at the old share first (trap 11). */
#ifdef PLANT_NO_SETTLE
#define PRESETTLE(i) skip
#else
#define PRESETTLE(i) settle(i)
#endif

/* After a change: the bucket settled to now is clamped to the new capacity
 * (apply_share_change); with PLANT_NO_SETTLE this settles the whole interval
 * under the new records. */
#define POSTSETTLE(i) settle(i)

/* Pin check (DESIGN §3 "Process leases pin share"): with the records as they
 * stand now, the leased units fit the capacity at every instant from now to
 * the lease's expiry. Result in hok. */
inline pinHolds(i) {
  hok = 1;
  cEff(i, hC);
  hx = now + off[i];
  do
  :: lg[i] > 0 && hx < le[i] ->
    shareAt(i, hx, hsh);
    if
    :: lg[i] > hC * hsh -> hok = 0
    :: else -> skip
    fi;
    hx++
  :: else -> break
  od
}

/* ------------------------------------------------------------ invariants */

inline checkAll() {
  hsum = 0; hpin = 0; hi = 0;
  do
  :: hi < N ->
    hL2 = now + off[hi];
    shareAt(hi, hL2, hsh2);
    hsum = hsum + hsh2;
    /* global form of the pin invariant: max(capacity of the applied share,
     * leased outstanding + bucket tokens) summed over regions <= C */
    cEff(hi, hcap);
    hcap = hcap * hsh2;
    if
    :: bex[hi] -> calcSettle(hi); ho = htk
    :: else -> ho = 0
    fi;
    if
    :: cl[hi] > 0 && hL2 < ce[hi] -> ho = ho + cl[hi]
    :: else -> skip
    fi;
    hpin = hpin + MAX(hcap, ho);
    hi++
  :: else -> break
  od;
  if
  :: hsum > U || hpin > (polIssued -> MAX(COLD, CNEW) : COLD) * U ->
    printf("MSC: shares sum %d, pinned sum %d (off %d %d, leased %d)\n", hsum, hpin, off[0], off[1], leasedMode)
  :: else -> skip
  fi;
  assert(hsum <= U);                                   /* sum of shares in use <= U */
  assert(hpin <= (polIssued -> MAX(COLD, CNEW) : COLD) * U)  /* leased + bucket pinned */
}

/* Admissions of c units now; every window of the history stays within
 * C + r*T (tokens; C = max(C_old, C_new) once a change is issued). */
inline admitted(c) {
  adm[WH - 1] = adm[WH - 1] + c;
  hsum = 0; hw = 0;
  do
  :: hw < WH ->
    hsum = hsum + adm[WH - 1 - hw];
    assert(hsum <= ((polIssued -> MAX(COLD, CNEW) : COLD) + R * hw) * U);
    hw++
  :: else -> break
  od
}

/* Bookkeeping that cannot change any future behaviour is dropped at a tick
 * (expired leases already settled past, lapsed reservations already settled
 * past, a recovery whose bucket rules no longer matter), so equal futures
 * are one state. */
inline canonicalize() {
  hi = 0;
  do
  :: hi < N ->
    hL2 = now + off[hi];
    if
    :: cl[hi] > 0 && hL2 >= ce[hi] -> cl[hi] = 0; ce[hi] = 0
    :: else -> skip
    fi;
    if
    :: lg[hi] > 0 && bex[hi] && ts[hi] >= le[hi] -> lg[hi] = 0; le[hi] = 0
    :: else -> skip
    fi;
    hk = 0;
    do
    :: hk < N ->
      he = 0;
      do
      :: he < NS ->
        if
        :: stU[SI(hi, hk, he)] > 0 && bex[hi] && !RESERVES(ts[hi], stD[SI(hi, hk, he)]) ->
          stU[SI(hi, hk, he)] = 0; stD[SI(hi, hk, he)] = 0; stD[SI(hi, hk, he)] = 0
        :: else -> skip
        fi;
        he++
      :: else -> break
      od;
      hk++
    :: else -> break
    od;
    if
    :: rec[hi] && bex[hi] && ts[hi] >= born[hi] + RECLEN && hL2 >= born[hi] + RECLEN + MAX(COLD, CNEW) ->
      rec[hi] = 0; born[hi] = 0
    :: else -> skip
    fi;
    hi++
  :: else -> break
  od
}

/* ------------------------------------------------------------ scripts */

/* loan_grant.lua: lender cI lends cU units to borrower cK until now + D. */
inline grant() {
  hL = now + off[cI];
  hok = 1;
#ifndef PLANT_GRANT_IN_RECOVERY
  if :: RECOV(cI, hL) -> hok = 0 :: else -> skip fi;
#endif
  /* current reservation for cK and the others' */
  hx = 0; hy = 0; hk = 0;
  do
  :: hk < N ->
    if
    :: hk != cI ->
      hm = 0; he = 0;
      do
      :: he < NS ->
        if
        :: stU[SI(cI, hk, he)] > hm && RESERVES(hL, stD[SI(cI, hk, he)]) -> hm = stU[SI(cI, hk, he)]
        :: else -> skip
        fi;
        he++
      :: else -> break
      od;
      if :: hk == cK -> hx = hm :: else -> hy = hy + hm fi
    :: else -> skip
    fi;
    hk++
  :: else -> break
  od;
  /* lendable: own base only, never below floor (trap 3) */
#ifdef PLANT_RELEND
  shareAt(cI, hL, hsh);
  hb = hsh + hx;                 /* the current share, borrowed units included */
#else
  baseEff(cI, hb);
  hb = hb - hy;
#endif
#ifndef PLANT_BELOW_FLOOR
  hb = hb - FLOOR;
#endif
  if :: MAX(cU, hx) > hb -> hok = 0 :: else -> skip fi;
  /* one grant per borrower per tick (a gossip round per tick): bounds seq */
  he = 0;
  do
  :: he < NS -> if :: stU[SI(cI, cK, he)] > 0 && stD[SI(cI, cK, he)] == hL + D -> hok = 0 :: else -> skip fi; he++
  :: else -> break
  od;
  if
  :: hok ->
    PRESETTLE(cI);
    hsu0 = stU[SI(cI, cK, 0)]; hsd0 = stD[SI(cI, cK, 0)]; hsu1 = stU[SI(cI, cK, 1)]; hsd1 = stD[SI(cI, cK, 1)];
    /* drop lapsed and dominated entries, then take a free slot */
    hfree = NS; he = 0;
    do
    :: he < NS ->
      if
      :: stU[SI(cI, cK, he)] > 0 && (!RESERVES(hL, stD[SI(cI, cK, he)]) ||
           (stU[SI(cI, cK, he)] <= cU && stD[SI(cI, cK, he)] <= hL + D)) ->
        stU[SI(cI, cK, he)] = 0; stD[SI(cI, cK, he)] = 0
      :: else -> skip
      fi;
      if :: stU[SI(cI, cK, he)] == 0 && hfree == NS -> hfree = he :: else -> skip fi;
      he++
    :: else -> break
    od;
    if
    :: hfree < NS ->
      stU[SI(cI, cK, hfree)] = cU; stD[SI(cI, cK, hfree)] = hL + D;
#ifndef PLANT_LEND_PINNED
      pinHolds(cI);
#endif
      if
      :: hok ->
        gU[PI(cI, cK)] = cU; gD[PI(cI, cK)] = hL + D;
        POSTSETTLE(cI)
      :: else ->   /* the loan would take share that backs a lease: refused */
        stU[SI(cI, cK, 0)] = hsu0; stD[SI(cI, cK, 0)] = hsd0; stU[SI(cI, cK, 1)] = hsu1; stD[SI(cI, cK, 1)] = hsd1;
        POSTSETTLE(cI)
      fi
    :: else -> POSTSETTLE(cI)   /* staircase full: the model's lender does not lend */
    fi
  :: else -> skip
  fi
}

/* gossip: lender cI ships its register g|cK. One message in flight per
 * link: a newer copy replaces an undelivered older one (that one is lost). */
inline send() {
  if
  :: gD[PI(cI, cK)] > 0 -> nU[PI(cI, cK)] = gU[PI(cI, cK)]; nD[PI(cI, cK)] = gD[PI(cI, cK)]
  :: else -> skip
  fi
}

/* loan_merge.lua: borrower cK merges the message from lender cI. Higher seq
 * wins; a seq <= the returned one is never used again (trap 12). */
inline merge() {
  hy = PI(cI, cK);
  hL = now + off[cK];
  if
  :: nD[hy] > retS[hy] && (nD[hy] > inD[hy] || (nD[hy] == inD[hy] && nU[hy] < inU[hy])) ->
    PRESETTLE(cK);
    inU[hy] = nU[hy]; inD[hy] = nD[hy];
    /* drop_lapsed (a returned loan stays: it bounds r|) */
    if
    :: !USES(hL, inD[hy]) && inD[hy] > retS[hy] -> inU[hy] = 0; inD[hy] = 0
    :: else -> skip
    fi;
    POSTSETTLE(cK)
  :: else -> skip
  fi
}

/* A recovering region returns nothing early: its Redis forgot the leases its
 * clients may still hold on borrowed share, so it cannot tell which share
 * backs none (found by this model; DESIGN §3-4 did not say it). */
#ifdef PLANT_RETURN_IN_RECOVERY
#define RETURN_ALLOWED(i, t) 1
#else
#define RETURN_ALLOWED(i, t) (!RECOV(i, t))
#endif

/* loan_return.lua: borrower cK returns early the loan held from lender cI. */
inline giveBack() {
  hy = PI(cI, cK);
  hL = now + off[cK];
  if
  :: inD[hy] > retS[hy] && USES(hL, inD[hy]) && RETURN_ALLOWED(cK, hL) ->
    PRESETTLE(cK);
    hseq = inD[hy];
    retS[hy] = hseq;
#ifndef PLANT_RETURN_PINNED
    pinHolds(cK);
#else
    hok = 1;
#endif
    if
    :: hok ->
#ifdef PLANT_RETURN_REUSE
      /* forgets the loan instead of remembering the returned seq */
      retS[hy] = 0; inU[hy] = 0; inD[hy] = 0;
#endif
      rn[hy] = MAX(rn[hy], hseq);    /* durable, then told (the return message) */
      POSTSETTLE(cK)
    :: else -> retS[hy] = 0; POSTSETTLE(cK)   /* backs a lease: kept */
    fi
  :: else -> skip
  fi
}

/* loan_return_received.lua: lender cI frees entries for cK with seq <= returned. */
inline returnReceived() {
  hy = PI(cI, cK);
  PRESETTLE(cI);
  he = 0;
  do
  :: he < NS ->
    if
    :: stU[SI(cI, cK, he)] > 0 && stD[SI(cI, cK, he)] <= rn[hy] ->
      stU[SI(cI, cK, he)] = 0; stD[SI(cI, cK, he)] = 0
    :: else -> skip
    fi;
    he++
  :: else -> break
  od;
  POSTSETTLE(cI)
}

/* lease_acquire.lua: region cI leases all its whole-unit tokens for cU ticks. */
inline leaseAcquire() {
  hL = now + off[cI];
  if
  :: leasedMode && lg[cI] == 0 && cl[cI] == 0 ->
    settle(cI);
    if
    :: tk[cI] > 0 ->
      lg[cI] = tk[cI]; le[cI] = hL + cU;
#ifdef PLANT_LEASE_OUTLIVES_LOAN
      /* checked at now only: may outlive a borrowed loan's deadline - eps */
      shareAt(cI, hL, hsh); cEff(cI, hC);
      hok = (lg[cI] <= hC * hsh);
#else
      pinHolds(cI);
#endif
      if
      :: hok ->
#ifdef PLANT_LEASE_UNCOUNTED
        cl[cI] = lg[cI]; ce[cI] = le[cI];
        lg[cI] = 0; le[cI] = 0                      /* not counted against capacity */
#else
        cl[cI] = lg[cI]; ce[cI] = le[cI];
        tk[cI] = 0
#endif
      :: else -> lg[cI] = 0; le[cI] = 0
      fi
    :: else -> skip
    fi
  :: else -> skip
  fi
}

/* lease_release.lua: the client gives back what it did not spend. */
inline leaseRelease() {
  hL = now + off[cI];
  if
  :: cl[cI] > 0 && hL < ce[cI] ->
    settle(cI);
    if
    :: lg[cI] > 0 && hL < le[cI] -> tk[cI] = tk[cI] + cl[cI]; lg[cI] = 0; le[cI] = 0
    :: else -> skip      /* Redis lost the lease (state loss): nothing comes back */
    fi;
    cl[cI] = 0; ce[cI] = 0
  :: else -> skip
  fi
}

/* State loss of region cI (marker gone, or a failover seen as a replid
 * change): its Redis state is gone, a new incarnation is born now. */
inline stateLoss() {
  hL = now + off[cI];
  bex[cI] = 0; tk[cI] = 0; ts[cI] = 0; lg[cI] = 0; le[cI] = 0;
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
#ifdef PLANT_SKIP_RECOVERY
  rec[cI] = 0; born[cI] = 0;
#else
  rec[cI] = 1; born[cI] = hL;
#endif
  losses++
}

/* Policy: region cI applies the issued version; shrinks at once (waiting for
 * its leases), growth only once every region has applied it. */
inline policyApply() {
  if
  :: polIssued && pv[cI] == 0 ->
    PRESETTLE(cI);
#ifdef PLANT_GROW_EARLY
    pv[cI] = 2;
#else
    pv[cI] = 1;
#endif
#ifndef PLANT_POLICY_IGNORES_LEASES
    pinHolds(cI);
    if :: !hok -> pv[cI] = 0 :: else -> skip fi;
#endif
    POSTSETTLE(cI)
  :: else -> skip
  fi
}

inline policyGrow() {
  hok = (polIssued && pv[cI] == 1);
  hk = 0;
  do
  :: hk < N -> if :: pv[hk] == 0 -> hok = 0 :: else -> skip fi; hk++
  :: else -> break
  od;
  if
  :: hok -> PRESETTLE(cI); pv[cI] = 2; POSTSETTLE(cI)
  :: else -> skip
  fi
}

/* The safe piecewise refill composes (settling to t1 then to t2 gives the
 * same tokens as settling to t2 at once), so the safe model settles every
 * bucket at each tick: equal buckets become one state. The refill plants
 * and PLANT_NO_SETTLE are not compositional and keep the lazy buckets. */
#if !defined(PLANT_COARSE_REFILL) && !defined(PLANT_CLAMP_NOW) && !defined(PLANT_CLAMP_LARGER) && !defined(PLANT_NO_SETTLE) && !defined(LAZY)
#define EAGER 1
#endif

inline tick() {
  now++;
#ifdef EAGER
  hy = 0;
  do
  :: hy < N -> if :: bex[hy] -> settle(hy) :: else -> skip fi; hy++
  :: else -> break
  od;
#endif
  hw = 0;
  do
  :: hw < WH - 1 -> adm[hw] = adm[hw + 1]; hw++
  :: else -> break
  od;
  adm[WH - 1] = 0;
  canonicalize()
}

#define ENDSTEP cI = 0; cK = 0; cU = 0

active proctype world() {
  /* clocks: any offsets within 2 eps; leased mode on or off */
  atomic {
#if N == 2
    /* equal clocks, or either one 2 eps ahead (equal offsets are all alike) */
#ifdef ALL_OFFSETS
    if :: off[0] = 0 :: off[0] = 1 :: off[0] = 2 fi;
    if :: off[1] = 0 :: off[1] = 1 :: off[1] = 2 fi;
#else
    if :: skip :: off[0] = 2 :: off[1] = 2 fi;
#endif
#else
    if :: off[0] = 0 :: off[0] = 2 fi;
    if :: off[1] = 0 :: off[1] = 2 fi;
    if :: off[2] = 0 :: off[2] = 2 fi;
#endif
#if defined(LEASED)
    leasedMode = 1;
#elif !defined(UNLEASED)
    if :: leasedMode = 1 :: leasedMode = 0 fi;
#endif
    /* a fresh cluster: buckets full (docs/internals.md "Fresh clusters") */
    cI = 0;
    do
    :: cI < N -> bex[cI] = 1; tk[cI] = COLD * BOLD(cI); ts[cI] = off[cI]; cI++
    :: else -> break
    od;
    ENDSTEP
  };
end_loop:
  do
  :: d_step { now < H -> tick(); printf("MSC: now=%d\n", now); checkAll() }
#ifdef ADMIT_ONE
  :: atomic { now < H -> PICKR(cI);          /* check: admit one unit */
       d_step { if :: bex[cI] -> calcSettle(cI) :: else -> htk = 0 fi;
         if
         :: htk >= 1 -> settle(cI); tk[cI] = tk[cI] - 1; admitted(1)
         :: else -> skip
         fi;
         checkAll(); ENDSTEP } }
#endif
  :: atomic { now < H -> PICKR(cI);          /* checks draining the bucket */
       d_step { if :: bex[cI] -> calcSettle(cI) :: else -> htk = 0 fi;
         if
         :: htk >= 1 -> settle(cI); hx = tk[cI]; tk[cI] = 0; printf("MSC: r%d admits %d units\n", cI, hx); admitted(hx)
         :: else -> skip
         fi;
         checkAll(); ENDSTEP } }
  :: atomic { now < H -> PICKP(cI, cK);
       if :: cU = 1 :: cU = 2 :: cU = 3 fi;
       d_step { grant(); printf("MSC: r%d grant to r%d u=%d ok=%d\n", cI, cK, cU, hok); checkAll(); ENDSTEP } }
  :: atomic { now < H -> PICKP(cI, cK); d_step { send(); printf("MSC: r%d ships loan to r%d\n", cI, cK); ENDSTEP } }
  :: atomic { now < H -> PICKP(cI, cK);
       if
       :: nD[PI(cI, cK)] != 0 ->
         d_step { merge(); printf("MSC: r%d merges loan from r%d u=%d d=%d\n", cK, cI, inU[PI(cI,cK)], inD[PI(cI,cK)]); checkAll() };
         if   /* delivered once, or kept to be delivered again (duplicate, late copy) */
         :: nU[PI(cI, cK)] = 0; nD[PI(cI, cK)] = 0
         :: skip
         fi
       :: else -> skip
       fi;
       ENDSTEP }
#ifdef LONG
  :: atomic { now < H -> PICKP(cI, cK); nU[PI(cI, cK)] = 0; nD[PI(cI, cK)] = 0; ENDSTEP }  /* lost */
#endif
  :: atomic { now < H -> PICKP(cI, cK); d_step { giveBack(); printf("MSC: r%d returns loan of r%d\n", cK, cI); checkAll(); ENDSTEP } }
  :: atomic { now < H -> PICKP(cI, cK);
       if
       :: rn[PI(cI, cK)] != 0 ->
         d_step { returnReceived(); printf("MSC: r%d receives return from r%d\n", cI, cK); checkAll() };
         if :: rn[PI(cI, cK)] = 0 :: skip fi    /* or delivered again later */
       :: else -> skip
       fi;
       ENDSTEP }
  :: atomic { now < H -> PICKP(cI, cK); rn[PI(cI, cK)] = 0; ENDSTEP }   /* lost */
  :: atomic { now < H && leasedMode -> PICKR(cI); 
#ifdef LONG
       if :: cU = 1 :: cU = D fi;
#else
       cU = D;
#endif

       d_step { leaseAcquire(); printf("MSC: r%d lease acquire dur=%d -> cl=%d ce=%d\n", cI, cU, cl[cI], ce[cI]); checkAll(); ENDSTEP } }
  :: atomic { now < H && leasedMode -> PICKR(cI);    /* the client spends its lease */
       d_step {
         if
         :: cl[cI] > 0 && now + off[cI] < ce[cI] -> hx = cl[cI]; cl[cI] = 0; printf("MSC: r%d client spends %d units\n", cI, hx); admitted(hx)
         :: else -> skip
         fi;
         checkAll(); ENDSTEP } }
#ifdef LONG
  :: atomic { now < H && leasedMode -> PICKR(cI); d_step { leaseRelease(); printf("MSC: r%d lease release\n", cI); checkAll(); ENDSTEP } }
#endif
  :: atomic { now < H && losses < MAXLOSS -> PICKR(cI); d_step { stateLoss(); printf("MSC: r%d loses its Redis state\n", cI); checkAll(); ENDSTEP } }
#ifndef NO_POLICY
  :: d_step { now < H && !polIssued -> polIssued = 1; printf("MSC: policy change issued\n") }
  :: atomic { now < H -> PICKR(cI); d_step { policyApply(); printf("MSC: r%d applies policy pv=%d\n", cI, pv[cI]); checkAll(); ENDSTEP } }
  :: atomic { now < H -> PICKR(cI); d_step { policyGrow(); printf("MSC: r%d grows policy pv=%d\n", cI, pv[cI]); checkAll(); ENDSTEP } }
#endif
  :: now == H -> break
  od
}
