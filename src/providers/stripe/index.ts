export * from './adapter';
export * from './errors';
export * from './webhook';
