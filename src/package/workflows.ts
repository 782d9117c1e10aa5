/**
 * `payment-workflows/workflows`: every workflow type the payment workers register, the entry of the workflow bundle.
 * Bundle it with your own workflows' entry (`export * from 'payment-workflows/workflows'`) to run both on one worker.
 */
export * from '../workflows';
