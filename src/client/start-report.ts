/**
 * Whether an Update-with-Start created its run: the server says so in the start response (`started`), but the SDK
 * (1.24) drops that field, and without it a charge needed a describe per payment to tell a first request from a repeat.
 * A workflow client over {@link startReporting}'s connection hands the flag of each call's first response to the
 * {@link StartReport} that the call runs under.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { type Client, type ConnectionLike, WorkflowClient } from '@temporalio/client';

/** What the first `ExecuteMultiOperation` response of a call said about its start; unset until it answered. */
export interface StartReport {
  started?: boolean;
}

/** A workflow client that reports starts, and the scope a call's report is collected in. */
export interface StartReporting {
  readonly workflow: WorkflowClient;
  /** Runs `fn` (calls of {@link workflow}) and answers its result with what the first start response said. */
  run<T>(fn: () => Promise<T>): Promise<{ readonly result: T; readonly report: StartReport }>;
}

/**
 * A second workflow client with the client's namespace, identity, data converter and interceptors, over the same
 * connection (no new socket), whose `executeMultiOperation` notes the start response's `started` flag. Only the
 * first response of a call counts: the SDK repeats the request until the update is accepted, and a repeat finds the
 * run its first attempt created.
 */
export function startReporting(client: Client): StartReporting {
  const reports = new AsyncLocalStorage<StartReport>();
  const connection = client.connection;
  const base = connection.workflowService;
  const workflowService: ConnectionLike['workflowService'] = Object.create(base);
  type Request = Parameters<typeof base.executeMultiOperation>[0];
  const executeMultiOperation = async (request: Request) => {
    const response = await base.executeMultiOperation(request);
    const report = reports.getStore();
    const started = response.responses?.[0]?.startWorkflow?.started;
    if (report !== undefined && report.started === undefined && typeof started === 'boolean') {
      report.started = started;
    }
    return response;
  };
  Object.assign(workflowService, { executeMultiOperation });
  const reportingConnection: ConnectionLike = {
    workflowService,
    get operatorService() {
      return connection.operatorService;
    },
    get plugins() {
      return connection.plugins;
    },
    // The client's owner closes the connection; this view of it never does.
    close: async () => {},
    ensureConnected: () => connection.ensureConnected(),
    withDeadline: (deadline, fn) => connection.withDeadline(deadline, fn),
    withMetadata: (metadata, fn) => connection.withMetadata(metadata, fn),
    withAbortSignal: (signal, fn) => connection.withAbortSignal(signal, fn),
  };
  const workflow = new WorkflowClient({
    connection: reportingConnection,
    namespace: client.options.namespace,
    identity: client.options.identity,
    dataConverter: client.options.dataConverter,
    interceptors: client.workflow.options.interceptors,
    queryRejectCondition: client.workflow.options.queryRejectCondition,
  });
  return {
    workflow,
    run: async (fn) => {
      const report: StartReport = {};
      const result = await reports.run(report, fn);
      return { result, report };
    },
  };
}
