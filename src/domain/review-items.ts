/**
 * Review items: a provider payment the sweep found that no payment of ours accounts for, or that disagrees with ours,
 * kept in a small workflow an operator finds (`PaymentStatus = 'needs_review'`) and resolves. The zod schema of a
 * resolution (the API parses with it) and, re-exported, the zod-free definitions workflow code imports.
 */
import { z } from 'zod';
import {
  type ResolveReviewItemRequest as ResolveReviewItemRequestShape,
  reviewItemActions,
} from './review-item-definitions';

export * from './review-item-definitions';

/** What the operator did about it (`parseReviewItemResolution` checks the same in workflow code). */
export const ResolveReviewItemRequest = z.strictObject({
  action: z.enum(reviewItemActions),
  note: z
    .string()
    .trim()
    .min(1, { message: 'note must not be empty' })
    .max(1000, { message: 'note must be at most 1000 characters' }),
  /** Who resolved it (audit trail; an operator id, never customer data). */
  operator: z.string().min(1).max(128).optional(),
});
export type ResolveReviewItemRequest = ResolveReviewItemRequestShape;

// The schema and the zod-free type describe the same values (a compile error here means they drifted apart).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameShape: Same<z.infer<typeof ResolveReviewItemRequest>, ResolveReviewItemRequestShape> = true;
void sameShape;
