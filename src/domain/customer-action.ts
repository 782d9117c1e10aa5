/** How long a payment waits for the customer by default (`CUSTOMER_ACTION_TIMEOUT_MS`): one hour. Zod-free: workflows read it. */
export const defaultCustomerActionTimeoutMs = 60 * 60 * 1_000;
