print("caregate")
