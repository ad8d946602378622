/** What a personal text reads once its customer is erased, wherever it was kept. */
export const ERASED = "[erased]";
