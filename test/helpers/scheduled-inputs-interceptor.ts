/**
 * A workflow interceptor module for replay tests (bundled with the workflows, so it imports only the workflow SDK):
 * reports every activity and local activity the workflow schedules, with its input, and the run's result, through the
 * `scheduled` sink.
 * The sink is called during replay too (`callDuringReplay`), so a replay shows what the run handed over: the payment's
 * news, the key answers, the ledger's arguments.
 */
import { proxySinks, type Sinks, type WorkflowInterceptorsFactory } from '@temporalio/workflow';

export interface ScheduledSinks extends Sinks {
  scheduled: {
    input(kind: 'activity' | 'local', activityType: string, args: unknown[]): void;
    /** The run's result: a payment's final view. */
    result(value: unknown): void;
  };
}

const { scheduled } = proxySinks<ScheduledSinks>();

export const interceptors: WorkflowInterceptorsFactory = () => ({
  inbound: [
    {
      async execute(input, next) {
        const value = await next(input);
        scheduled.result(value);
        return value;
      },
    },
  ],
  outbound: [
    {
      scheduleActivity(input, next) {
        scheduled.input('activity', input.activityType, input.args);
        return next(input);
      },
      scheduleLocalActivity(input, next) {
        scheduled.input('local', input.activityType, input.args);
        return next(input);
      },
    },
  ],
});
