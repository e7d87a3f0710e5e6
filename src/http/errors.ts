/** The HTTP layer's view of the API's errors (src/errors/): the same classes and builders. */
export * from '../errors/api-error.js';
