export declare enum StoreType {
  Sqlite = 0,
}
export declare class OlmMachine {
  private constructor();
}
