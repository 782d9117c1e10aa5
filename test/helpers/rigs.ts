/** The world's fixture by its old module, for test/workflows/continue-as-new.test.ts (edited on another branch). */
export { serverPerFile } from './world';
