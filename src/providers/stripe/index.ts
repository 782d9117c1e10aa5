export * from './adapter';
export * from './classify';
export * from './webhook';
