// The workflow bundle's entry: every workflow type the worker registers.
export { chargeWorkflow } from './charge';
export { captureWorkflow } from './capture';
export { refundWorkflow } from './refund';
export { reconcileWorkflow } from './reconcile';
export { parkedProviderEventWorkflow } from './parked-event';
export { reconcileSweepWorkflow } from './sweep';
export { reviewItemWorkflow } from './review-item';
export { merchantWebhooksWorkflow } from './merchant-webhooks';
