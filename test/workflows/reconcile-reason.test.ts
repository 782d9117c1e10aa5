/**
 * The review reason of a reconcile that found nothing says what its resubmission did: refused here (nothing sent),
 * refused by the provider without processing it (nothing took effect), or sent with its outcome unknown.
 */
import { type ReconcileTally, reconcileReviewReason } from '../../src/workflows/reconcile-reason';

const tally = (resubmission: ReconcileTally['resubmission'], refused?: number): ReconcileTally => ({
  checks: 3,
  notFound: 3,
  failedLookups: 0,
  untilKeyLifetime: false,
  ...(resubmission === undefined ? {} : { resubmission }),
  ...(refused === undefined ? {} : { refusedResubmissions: refused }),
});

describe('reconcileReviewReason', () => {
  it('tells a resubmission refused here, one the provider did not process, and one whose outcome is unknown apart', () => {
    const head = 'create not found at simulator after 3 checks over 1 h: 3 look-ups found nothing; ';
    expect(
      reconcileReviewReason('create', 'simulator', tally({ sends: 0, refusedWhy: 'breaker_open' }, 2), 3_600_000),
    ).toBe(
      `${head}the resubmission with the same key was refused here before sending 2 times (breaker_open): nothing was sent`,
    );
    expect(
      reconcileReviewReason(
        'create',
        'simulator',
        tally({ sends: 1, unprocessed: true, refusedWhy: 'provider_unavailable' }, 3),
        3_600_000,
      ),
    ).toBe(
      `${head}the resubmission with the same key was refused 3 times, the last by the provider without processing it ` +
        '(provider_unavailable): nothing took effect',
    );
    expect(reconcileReviewReason('create', 'simulator', tally({ sends: 1 }), 3_600_000)).toBe(
      `${head}one resubmission with the same key was sent, its outcome unknown`,
    );
    expect(
      reconcileReviewReason('create', 'simulator', { ...tally({ sends: 2 }), unknownResubmissions: 3 }, 3_600_000),
    ).toBe(`${head}3 resubmissions with the same key were sent, their outcomes unknown`);
  });
});
